package api_test

import (
	"context"
	"crypto"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// reservedHosts are the test control plane's and Temporal's names.
var reservedHosts = []string{"cp.example.test", "temporal.example.test", "10.0.0.1", "127.0.0.1", "localhost"}

// siteToken makes a site (a loopback lab or not) and a site token for it.
func (a *agentsEnv) siteToken(t *testing.T, lab bool) (string, string) {
	t.Helper()
	ctx := context.Background()
	site, _, err := a.store.CreateSite(ctx, store.Site{TenantID: "root", Kind: "shared", Region: "r", LoopbackLab: lab})
	if err != nil {
		t.Fatal(err)
	}
	plain, hash := pki.NewToken(pki.TokenSite)
	if _, _, err := a.store.CreateSiteToken(ctx, store.SiteToken{TenantID: "root", SiteID: site.ID, ExpiresAt: time.Now().Add(time.Hour)}, hash); err != nil {
		t.Fatal(err)
	}
	return site.ID, string(plain)
}

func (a *agentsEnv) joinHosts(t *testing.T, token string, hosts ...string) (*v1.JoinResponse, crypto.Signer, error) {
	t.Helper()
	key, _, err := pki.NewEd25519Key()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := pki.MarshalPublicKey(key.Public())
	resp, err := bettercomputev1connect.NewJoinServiceClient(a.client(t, nil, nil), a.url).Join(context.Background(),
		connect.NewRequest(&v1.JoinRequest{Token: token, Role: "site", PublicKeyPem: pub, ServeHosts: hosts}))
	if err != nil {
		return nil, key, err
	}
	return resp.Msg, key, nil
}

// A site agent gets serving certificates only for names its site may have:
// never the control plane's or Temporal's, never loopback off a loopback
// lab, never thousands; what it declared at its join is all it may renew.
func TestJoinServeHostsRefused(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	site, token := a.siteToken(t, false)
	many := make([]string, 3000)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.site.test", i)
	}
	tests := []struct {
		name  string
		hosts []string
		kind  string
		quote string
	}{
		{"the control plane's name", []string{"relay.site.test", "cp.example.test"}, "PERMISSION_DENIED", "cp.example.test"},
		{"Temporal's name", []string{"temporal.example.test"}, "PERMISSION_DENIED", "temporal.example.test"},
		{"the control plane's address", []string{"10.0.0.1"}, "PERMISSION_DENIED", "10.0.0.1"},
		{"3000 names", many, "INVALID_INPUT", "3000"},
		{"17 names", many[:17], "INVALID_INPUT", "at most 16"},
		{"loopback", []string{"127.0.0.1"}, "PERMISSION_DENIED", "loopback"},
		{"IPv6 loopback", []string{"::1"}, "PERMISSION_DENIED", "loopback"},
		{"localhost", []string{"localhost"}, "PERMISSION_DENIED", "loopback"},
		{"a wildcard", []string{"*.site.test"}, "INVALID_INPUT", "*.site.test"},
	}
	for _, tt := range tests {
		_, _, err := a.joinHosts(t, token, tt.hosts...)
		if kind(err) != tt.kind || !strings.Contains(err.Error(), tt.quote) {
			t.Errorf("Join(%s) = %.200v; want %s naming %s", tt.name, err, tt.kind, tt.quote)
		}
	}
	// Each was refused before the token was consumed: it still joins.
	if s, _ := a.store.GetSite(context.Background(), "root", site); len(s.ServeHosts) != 0 {
		t.Errorf("serve hosts after refused joins = %v, want none", s.ServeHosts)
	}
	resp, key, err := a.joinHosts(t, token, "relay.site.test", "10.0.0.9")
	if err != nil {
		t.Fatalf("Join(own names) = %v", err)
	}
	serving, _ := pki.ParseCert(resp.ServingCertPem)
	if serving == nil || serving.VerifyHostname("relay.site.test") != nil || serving.VerifyHostname("10.0.0.9") != nil {
		t.Errorf("Join(own names) serving certificate = %v; want relay.site.test and 10.0.0.9", serving)
	}
	if s, _ := a.store.GetSite(context.Background(), "root", site); !cmp.Equal(s.ServeHosts, []string{"relay.site.test", "10.0.0.9"}) {
		t.Errorf("declared serve hosts = %v, want [relay.site.test 10.0.0.9]", s.ServeHosts)
	}

	// A renewal names only what the join declared.
	hc := a.client(t, resp.CertPem, key)
	if _, err := a.renew(hc, "relay.site.test", "other.site.test"); kind(err) != "PERMISSION_DENIED" || !strings.Contains(err.Error(), "other.site.test") {
		t.Errorf("Renew(an undeclared name) = %v; want PERMISSION_DENIED naming other.site.test", err)
	}
	if _, err := a.renew(hc, "relay.site.test"); err != nil {
		t.Errorf("Renew(a declared name) = %v", err)
	}

	// Another site, of any tenant, cannot declare this site's name.
	_, token2 := a.siteToken(t, false)
	if _, _, err := a.joinHosts(t, token2, "relay.site.test"); kind(err) != "PERMISSION_DENIED" || !strings.Contains(err.Error(), "relay.site.test") {
		t.Errorf("Join(another site's name) = %v; want PERMISSION_DENIED naming relay.site.test", err)
	}
}

// A loopback lab's agent may be certified for loopback, never for the
// control plane's other names.
func TestLoopbackLabServeHosts(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	_, token := a.siteToken(t, true)
	if _, _, err := a.joinHosts(t, token, "cp.example.test"); kind(err) != "PERMISSION_DENIED" {
		t.Errorf("Join(lab, the control plane's name) = %v, want PERMISSION_DENIED", err)
	}
	resp, _, err := a.joinHosts(t, token, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatalf("Join(lab, loopback) = %v", err)
	}
	if c, _ := pki.ParseCert(resp.ServingCertPem); c == nil || c.VerifyHostname("127.0.0.1") != nil {
		t.Errorf("Join(lab, loopback) serving certificate does not name 127.0.0.1")
	}
}

// The agents' listener takes no certificate (joins), a site's or a node's
// (bcd node renews); a control-plane or ramdisk certificate is refused at
// the handshake, before any handler.
func TestAgentsListenerRefusesOtherRoles(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	for _, role := range []pki.Role{pki.RoleControlPlane, pki.RoleRamdisk} {
		key, _, _ := pki.NewEd25519Key()
		id := ids.New(ids.Node)
		if role == pki.RoleControlPlane {
			id = "control-plane"
		}
		certPEM, err := a.ca.Issue(key.Public(), role, id, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// Refused at the handshake: the client sees the connection fail (the
		// TLS alert, or under TLS 1.3 a broken pipe or reset when it wrote
		// first), never an answer of a handler, which would carry its code.
		_, err = a.renew(a.client(t, certPEM, key), "127.0.0.1")
		if connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("Renew as %s = %v (%s); want the TLS handshake refused, no handler's answer", role, err, connect.CodeOf(err))
		}
	}
	certPEM, key := a.recordedSiteCert(t, time.Hour)
	if _, err := a.renew(a.client(t, certPEM, key), "127.0.0.1"); err != nil {
		t.Errorf("Renew as the site = %v", err)
	}
}
