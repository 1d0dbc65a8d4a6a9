package siteagent

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

func TestRenewDue(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	leaf := &x509.Certificate{NotBefore: start, NotAfter: start.Add(30 * 24 * time.Hour)}
	tests := []struct {
		after time.Duration
		want  bool
	}{
		{0, false}, {19 * 24 * time.Hour, false}, {21 * 24 * time.Hour, true}, {31 * 24 * time.Hour, true},
	}
	for _, tt := range tests {
		if got := renewDue(leaf, start.Add(tt.after)); got != tt.want {
			t.Errorf("renewDue(30-day cert, after %v) = %v, want %v", tt.after, got, tt.want)
		}
	}
}

// serialOf returns the serial of the certificate in a data dir file.
func serialOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.ParseCert(b)
	if err != nil {
		t.Fatalf("ParseCert(%s) = %v", path, err)
	}
	return c.SerialNumber.Text(16)
}

// joined starts an agent once (its one-hour certificate fresh, so no
// renewal), stops it and returns its config for a restart.
func joinedConfig(t *testing.T, cp *fakecp.CP) Config {
	t.Helper()
	cfg := testConfig(t, cp)
	startAgent(t, cfg).Stop()
	if got := cp.Renews.Load(); got != 0 {
		t.Errorf("renewals by an agent with a fresh certificate = %d, want 0", got)
	}
	cfg.TokenFile = ""
	return cfg
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestNearlyExpiredAgentRenewsAtStart(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := joinedConfig(t, cp)
	certPath, servingPath := filepath.Join(cfg.DataDir, CertFile), filepath.Join(cfg.DataDir, ServingFile)
	oldCert, oldServing := serialOf(t, certPath), serialOf(t, servingPath)

	// 50 minutes into its one-hour certificate, less than a third is left.
	cfg.Now = func() time.Time { return time.Now().Add(50 * time.Minute) }
	a := startAgent(t, cfg)
	waitFor(t, "the renewal", func() bool { return a.id.certs.leaf().SerialNumber.Text(16) != oldCert })
	newCert := a.id.certs.leaf().SerialNumber.Text(16)
	if got := serialOf(t, certPath); got != newCert {
		t.Errorf("%s after renewal = serial %s, want the live %s (was %s)", CertFile, got, newCert, oldCert)
	}
	if got := serialOf(t, servingPath); got == oldServing {
		t.Errorf("%s after renewal = serial %s, want a new one", ServingFile, got)
	}
	if got := cp.Renews.Load(); got != 1 {
		t.Errorf("renewals = %d, want 1", got)
	}
	// The control plane client presents the new certificate.
	sc := bettercomputev1connect.NewSecretsServiceClient(a.cp, cp.URL())
	if _, err := sc.Resolve(t.Context(), connect.NewRequest(&v1.ResolveSecretRequest{Ref: "secret://t/none"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("Resolve after renewal = %v, want NOT_FOUND", err)
	}
	if got := cp.LastPeerSerial(); got != newCert {
		t.Errorf("control plane client presented serial %s after renewal, want %s", got, newCert)
	}
	// So does a new connection with the Temporal client's TLS config.
	tc, err := a.temporalTLS()
	if err != nil {
		t.Fatal(err)
	}
	tc = tc.Clone()
	tc.ServerName = "127.0.0.1" // the fake control plane stands in for the frontend
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	t.Cleanup(hc.CloseIdleConnections)
	if resp, err := hc.Get(cp.URL() + "/"); err != nil {
		t.Fatalf("GET over the Temporal TLS config = %v", err)
	} else {
		resp.Body.Close()
	}
	if got := cp.LastPeerSerial(); got != newCert {
		t.Errorf("Temporal TLS config presented serial %s after renewal, want %s", got, newCert)
	}
	// And the relay serves its new serving certificate.
	if got := relaySerial(t, a); got != serialOf(t, servingPath) {
		t.Errorf("relay serves serial %s after renewal, want %s", got, serialOf(t, servingPath))
	}
}

func relaySerial(t *testing.T, a *Agent) string {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(a.RelayURL(), "https://"), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the serial is read
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

func TestRefusedRenewalKeepsTheAgentRunning(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := joinedConfig(t, cp)
	before, err := os.ReadFile(filepath.Join(cfg.DataDir, CertFile))
	if err != nil {
		t.Fatal(err)
	}
	cp.RefuseRenew.Store(true)
	cfg.Now = func() time.Time { return time.Now().Add(50 * time.Minute) }
	cfg.RenewCheckEvery = 20 * time.Millisecond
	a := startAgent(t, cfg)
	waitFor(t, "a retried renewal", func() bool { return cp.Renews.Load() >= 2 })
	if after, _ := os.ReadFile(filepath.Join(cfg.DataDir, CertFile)); !bytes.Equal(after, before) {
		t.Errorf("%s changed after a refused renewal", CertFile)
	}
	select {
	case err := <-a.errc:
		t.Errorf("agent failed after a refused renewal: %v", err)
	default:
	}
	if status, _ := call(t, http.DefaultClient, http.MethodGet, a.BootURL()+"/ipxe?mac=52-54-00-AA-00-09", nil); status >= 500 {
		t.Errorf("boot listener does not answer after a refused renewal")
	}
	// Once the control plane answers, the next check renews.
	cp.RefuseRenew.Store(false)
	old := a.id.certs.leaf().SerialNumber.Text(16)
	waitFor(t, "the renewal after refusals", func() bool { return a.id.certs.leaf().SerialNumber.Text(16) != old })
}
