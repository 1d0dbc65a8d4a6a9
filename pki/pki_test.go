package pki

import (
	"crypto/x509"
	"net/url"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func certWithURIs(t testing.TB, uris ...string) *x509.Certificate {
	t.Helper()
	c := &x509.Certificate{}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("url.Parse(%q) = %v", s, err)
		}
		c.URIs = append(c.URIs, u)
	}
	return c
}

func TestIdentify(t *testing.T) {
	t.Parallel()
	const td = testDomain
	tests := []struct {
		name     string
		cert     *x509.Certificate
		role     Role
		identity string
	}{
		{"site", certWithURIs(t, "spiffe://"+td+"/site/site_01k5w"), RoleSite, "site_01k5w"},
		{"ramdisk", certWithURIs(t, "spiffe://"+td+"/ramdisk/node_01k5w"), RoleRamdisk, "node_01k5w"},
		{"node", certWithURIs(t, "spiffe://"+td+"/node/node_01k5w"), RoleNode, "node_01k5w"},
		{"control plane", certWithURIs(t, "spiffe://"+td+"/control-plane/cp-1.example.test"), RoleControlPlane, "cp-1.example.test"},
		{"nil cert", nil, "", ""},
		{"missing SAN", certWithURIs(t), "", ""},
		{"two SANs", certWithURIs(t, "spiffe://"+td+"/site/site_a", "spiffe://"+td+"/site/site_b"), "", ""},
		{"wrong trust domain", certWithURIs(t, "spiffe://other.example.test/site/site_a"), "", ""},
		{"trust domain suffix", certWithURIs(t, "spiffe://evil."+td+"/site/site_a"), "", ""},
		{"upper-case trust domain", certWithURIs(t, "spiffe://SITE.example.test/site/site_a"), "", ""},
		{"unknown role", certWithURIs(t, "spiffe://"+td+"/admin/site_a"), "", ""},
		{"no identity", certWithURIs(t, "spiffe://"+td+"/site"), "", ""},
		{"empty identity", certWithURIs(t, "spiffe://"+td+"/site/"), "", ""},
		{"three segments", certWithURIs(t, "spiffe://"+td+"/site/site_a/x"), "", ""},
		{"dot dot", certWithURIs(t, "spiffe://"+td+"/site/.."), "", ""},
		{"https scheme", certWithURIs(t, "https://"+td+"/site/site_a"), "", ""},
		{"port", certWithURIs(t, "spiffe://"+td+":443/site/site_a"), "", ""},
		{"user", certWithURIs(t, "spiffe://u@"+td+"/site/site_a"), "", ""},
		{"query", certWithURIs(t, "spiffe://"+td+"/site/site_a?x=1"), "", ""},
		{"empty query", certWithURIs(t, "spiffe://"+td+"/site/site_a?"), "", ""},
		{"fragment", certWithURIs(t, "spiffe://"+td+"/site/site_a#x"), "", ""},
		{"escaped", certWithURIs(t, "spiffe://"+td+"/site/%73ite_a"), "", ""},
		{"escaped slash", certWithURIs(t, "spiffe://"+td+"/site/site_a%2Fx"), "", ""},
		{"CA certificate", &x509.Certificate{IsCA: true, URIs: certWithURIs(t, "spiffe://"+td+"/site/site_a").URIs}, "", ""},
	}
	for _, tt := range tests {
		role, id, err := Identify(tt.cert, td)
		if tt.role == "" {
			if !errs.Is(err, errs.Unauthenticated) {
				t.Errorf("Identify(%s) = %s, %s, %v; want UNAUTHENTICATED", tt.name, role, id, err)
			}
			continue
		}
		if err != nil || role != tt.role || id != tt.identity {
			t.Errorf("Identify(%s) = %s, %s, %v; want %s, %s", tt.name, role, id, err, tt.role, tt.identity)
		}
	}
}

// FuzzIdentify feeds Identify arbitrary URIs: it must never panic, refuse with
// UNAUTHENTICATED only, and accept only what SPIFFEID would write back unchanged.
func FuzzIdentify(f *testing.F) {
	for _, s := range []string{
		"spiffe://" + testDomain + "/site/site_01k5w",
		"spiffe://" + testDomain + "/control-plane/cp-1.example.test",
		"spiffe://" + testDomain + "/site/../node/x",
		"spiffe://" + testDomain + "//site/x",
		"spiffe://" + testDomain + "/site/x%00",
		"spiffe://" + testDomain + "/site/x#",
		"spiffe:" + testDomain + "/site/x",
		"spiffe:///site/x",
		"SPIFFE://" + testDomain + "/site/x",
		"spiffe://" + testDomain + "./site/x",
		"spiffe://[::1]/site/x",
		"%",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		role, id, err := Identify(&x509.Certificate{URIs: []*url.URL{u}}, testDomain)
		if err != nil {
			if !errs.Is(err, errs.Unauthenticated) {
				t.Fatalf("Identify(%q) = %v, want UNAUTHENTICATED or success", s, err)
			}
			return
		}
		if got, want := SPIFFEID(testDomain, role, id).String(), u.String(); got != want {
			t.Fatalf("Identify(%q) = %s, %s, which writes back as %q, want %q", s, role, id, got, want)
		}
		if !role.Valid() || ValidateIdentity(id) != nil {
			t.Fatalf("Identify(%q) = %q, %q: an invalid role or identity passed", s, role, id)
		}
	})
}
