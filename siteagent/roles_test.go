package siteagent

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// poser starts a TLS server on 127.0.0.1 presenting another site's serving
// certificate, issued by the project's CA for the very address dialled.
func poser(t *testing.T, cp *fakecp.CP) *httptest.Server {
	t.Helper()
	key, keyPEM, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := cp.CA.IssueServer(key.Public(), pki.RoleSite, "site_other", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "posing as the control plane")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// A site's serving certificate presented as the control plane, or as
// Temporal's frontend, to another site's agent is refused at the handshake,
// before the join, after it, and by the Temporal client; the error names
// the role.
func TestAgentRefusesAnotherSiteAsControlPlane(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	a := startAgent(t, cfg)
	p := poser(t, cp)
	posed := cfg
	posed.ControlPlaneURL = p.URL
	before, err := controlPlaneClient(&posed, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := controlPlaneClient(&posed, a.id)
	if err != nil {
		t.Fatal(err)
	}
	for name, hc := range map[string]*http.Client{"before the join": before, "after the join": after} {
		resp, err := hc.Get(p.URL)
		if err == nil {
			resp.Body.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "role site") || !strings.Contains(err.Error(), "want role control-plane") {
			t.Errorf("GET the poser %s = %v; want the handshake refused naming role site and control-plane", name, err)
		}
	}
	tc, err := a.temporalTLS()
	if err != nil || tc == nil {
		t.Fatalf("temporalTLS() = %v, %v; want mutual TLS (the join said so)", tc, err)
	}
	tc = tc.Clone()
	tc.ServerName = "127.0.0.1"
	conn, err := tls.Dial("tcp", strings.TrimPrefix(p.URL, "https://"), tc)
	if err == nil {
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "role site") {
		t.Errorf("dial the poser as Temporal = %v; want the handshake refused naming role site", err)
	}
	// The real control plane still passes.
	resp, err := after.Get(cp.URL())
	if err != nil {
		t.Fatalf("GET the control plane = %v", err)
	}
	resp.Body.Close()
}
