package pki

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// servingTLS starts a TLS server presenting a serving certificate of role
// for localhost and 127.0.0.1, accepting clients accept wants.
func servingTLS(t *testing.T, ca *CA, role Role, id string, accept Want) *httptest.Server {
	t.Helper()
	key, keyPEM, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.IssueServer(key.Public(), role, id, []string{"localhost", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ca.ServerTLS(certPEM, keyPEM, accept)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role, id, _ := PeerIdentity(*r.TLS, ca.TrustDomain())
		fmt.Fprintf(w, "%s %s", role, id)
	}))
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// A site's serving certificate is CA-signed and names the host dialled, but
// a client that wants the control plane refuses it, naming the role.
func TestClientRefusesServerOfAnotherRole(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	poser := servingTLS(t, ca, RoleSite, "site_b", Want{Roles: Roles(), Optional: true})
	siteA := agentTLS(t, ca, ca, RoleSite, "site_a") // wants the control plane
	_, err := get(t, poser, siteA)
	if err == nil || !strings.Contains(err.Error(), "role site") || !strings.Contains(err.Error(), "want role control-plane") {
		t.Errorf("GET a site's server as the control plane = %v; want refused naming role site and control-plane", err)
	}
	cp := servingTLS(t, ca, RoleControlPlane, "control-plane", Want{Roles: Roles(), Optional: true})
	if got, err := get(t, cp, siteA); err != nil || got != "site site_a" {
		t.Errorf("GET the control plane = %q, %v; want site site_a", got, err)
	}
	// A client wanting one site refuses another site's relay.
	ramdisk := agentTLS(t, ca, ca, RoleRamdisk, "node_a")
	ramdisk.VerifyConnection = VerifyPeer(ca.TrustDomain(), Want{Roles: []Role{RoleSite}, Identity: "site_a"})
	if _, err := get(t, poser, ramdisk); err == nil || !strings.Contains(err.Error(), "identity site_a") {
		t.Errorf("GET site_b's relay wanting site_a = %v; want refused naming site_a", err)
	}
}

// A server refuses a client whose role it does not want, before any
// handler runs; with Optional, a client with no certificate still passes.
func TestServerRefusesClientOfAnotherRole(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	agents := servingTLS(t, ca, RoleControlPlane, "control-plane",
		Want{Roles: []Role{RoleSite, RoleRamdisk, RoleNode}, Optional: true})
	asCP := agentTLS(t, ca, ca, RoleControlPlane, "control-plane")
	if got, err := get(t, agents, asCP); err == nil {
		t.Errorf("GET the agents' listener as the control plane = %q; want the handshake refused", got)
	}
	if got, err := get(t, agents, agentTLS(t, ca, ca, RoleSite, "site_a")); err != nil || got != "site site_a" {
		t.Errorf("GET the agents' listener as a site = %q, %v; want site site_a", got, err)
	}
	if _, err := get(t, agents, clientTLS(t, ca, nil, nil)); err != nil {
		t.Errorf("GET the agents' listener with no certificate = %v; want it to pass (joins)", err)
	}
}

func TestVerifyPeerStates(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	w := Want{Roles: []Role{RoleControlPlane}}
	if err := VerifyPeer(ca.TrustDomain(), w)(tls.ConnectionState{}); err == nil {
		t.Errorf("VerifyPeer(no certificate, not optional) = nil, want refused")
	}
	if err := (Want{}).match(RoleControlPlane, "x"); err == nil {
		t.Errorf("Want{}.match() = nil, want refused: a config without its Want accepts nobody")
	}
	if got, err := TrustDomainOf(ca.Certificate()); err != nil || got != ca.TrustDomain() {
		t.Errorf("TrustDomainOf(CA) = %q, %v; want %q", got, err, ca.TrustDomain())
	}
}
