package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// mtlsServer starts a real TLS server on loopback that answers "<role> <identity>"
// of its verified peer, and counts the requests that reached the handler.
func mtlsServer(t *testing.T, ca *CA) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	key, keyPEM, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.IssueServer(key.Public(), RoleControlPlane, "cp-1", []string{"localhost", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ca.ServerTLS(certPEM, keyPEM, Want{Roles: Roles()})
	if err != nil {
		t.Fatalf("ServerTLS = %v", err)
	}
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		role, id, err := PeerIdentity(*r.TLS, ca.TrustDomain())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "%s %s", role, id)
	}))
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &hits
}

// get calls the server as a client with cfg and returns the body.
func get(t *testing.T, srv *httptest.Server, cfg *tls.Config) (string, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Get(srv.URL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s: %s", resp.Status, b)
	}
	return string(b), err
}

// agentTLS issues a certificate with issuer for a new key and returns a client config.
func agentTLS(t *testing.T, issuer, trusted *CA, role Role, id string) *tls.Config {
	t.Helper()
	key, keyPEM, err := NewEd25519Key()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := issuer.Issue(key.Public(), role, id, time.Hour)
	if err != nil {
		t.Fatalf("Issue(%s, %s) = %v", role, id, err)
	}
	return clientTLS(t, trusted, certPEM, keyPEM)
}

func clientTLS(t *testing.T, trusted *CA, certPEM, keyPEM []byte) *tls.Config {
	t.Helper()
	cfg, err := ClientTLS(trusted.Pool(), certPEM, keyPEM, "localhost", trusted.TrustDomain(), Want{Roles: []Role{RoleControlPlane}})
	if err != nil {
		t.Fatalf("ClientTLS = %v", err)
	}
	return cfg
}

func TestMTLSServerReadsPeerIdentity(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	srv, hits := mtlsServer(t, ca)
	for _, tt := range []struct {
		role Role
		id   string
	}{
		{RoleSite, "site_01k5w"},
		{RoleRamdisk, "node_01k5w"},
		{RoleNode, "node_01k5x"},
		{RoleControlPlane, "cp-2"},
	} {
		got, err := get(t, srv, agentTLS(t, ca, ca, tt.role, tt.id))
		if want := string(tt.role) + " " + tt.id; err != nil || got != want {
			t.Errorf("GET as %s/%s = %q, %v; want %q", tt.role, tt.id, got, err, want)
		}
	}
	if got := hits.Load(); got != 4 {
		t.Errorf("handler reached %d times, want 4", got)
	}
}

func TestMTLSServerRefuses(t *testing.T) {
	t.Parallel()
	ca, dir := newTestCA(t)
	other, _ := newTestCA(t)
	srv, hits := mtlsServer(t, ca)
	past, err := Load(dir, WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	key, keyPEM, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	noSAN := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: signRaw(t, ca, key.Public()).Raw})
	tests := []struct {
		name string
		cfg  *tls.Config
		want string // the alert the server sends
	}{
		{"no client certificate", clientTLS(t, ca, nil, nil), "tls: certificate required"},
		{"certificate from another CA", agentTLS(t, other, ca, RoleSite, "site_a"), "tls: unknown certificate authority"},
		{"expired certificate", agentTLS(t, past, ca, RoleSite, "site_a"), "tls: expired certificate"},
		{"certificate without SPIFFE ID", clientTLS(t, ca, noSAN, keyPEM), "tls: bad certificate"},
	}
	for _, tt := range tests {
		got, err := get(t, srv, tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("GET with %s = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	if got := hits.Load(); got != 0 {
		t.Errorf("handler reached %d times by refused clients, want 0", got)
	}
	// The client checks the server too: one whose certificate is not for the
	// name dialled, or not from the trusted CA, is refused.
	cfg := agentTLS(t, ca, ca, RoleSite, "site_a")
	cfg.ServerName = "cp.elsewhere.test"
	if _, err := get(t, srv, cfg); err == nil {
		t.Errorf("GET with ServerName cp.elsewhere.test = nil error, want a hostname mismatch")
	}
	if _, err := get(t, srv, agentTLS(t, ca, other, RoleSite, "site_a")); err == nil {
		t.Errorf("GET trusting another CA = nil error, want an unknown authority")
	}
}

func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	_, keyPEM, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	_, otherKeyPEM, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(key.Public(), RoleSite, "site_a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cp := Want{Roles: []Role{RoleControlPlane}}
	td := ca.TrustDomain()
	if _, err := ca.ServerTLS(certPEM, otherKeyPEM, cp); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("ServerTLS(mismatched key) = %v, want INVALID_INPUT", err)
	}
	if _, err := ClientTLS(ca.Pool(), certPEM, otherKeyPEM, "localhost", td, cp); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("ClientTLS(mismatched key) = %v, want INVALID_INPUT", err)
	}
	if _, err := ClientTLS(nil, certPEM, keyPEM, "localhost", td, cp); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("ClientTLS(nil pool) = %v, want INVALID_INPUT", err)
	}
	if _, err := ClientTLS(ca.Pool(), certPEM, keyPEM, "", td, cp); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("ClientTLS(no server name) = %v, want INVALID_INPUT", err)
	}
	if _, err := ClientTLS(ca.Pool(), certPEM, keyPEM, "localhost", td, Want{}); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("ClientTLS(no wanted role) = %v, want INVALID_INPUT", err)
	}
	cert, _ := ParseCert(certPEM)
	unverified := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if _, _, err := PeerIdentity(unverified, ca.TrustDomain()); !errs.Is(err, errs.Unauthenticated) || !strings.Contains(err.Error(), "not verified") {
		t.Errorf("PeerIdentity(unverified chain) = %v, want UNAUTHENTICATED not verified", err)
	}
	if _, _, err := PeerIdentity(tls.ConnectionState{}, ca.TrustDomain()); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("PeerIdentity(no certificate) = %v, want UNAUTHENTICATED", err)
	}
}
