package agent

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/pki"
)

// A ramdisk takes as its relay only a site's serving certificate, and once
// joined only its own site's: a control plane's or another site's
// certificate from the same CA, for the same address, is refused, naming
// the role.
func TestRelayMustBeTheRamdisksSite(t *testing.T) {
	t.Parallel()
	ca, err := pki.Init(t.TempDir(), "ramdisk.example.test")
	if err != nil {
		t.Fatal(err)
	}
	serving := func(role pki.Role, id string) tls.ConnectionState {
		key, _, err := pki.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err := ca.IssueServer(key.Public(), role, id, []string{"127.0.0.1"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := pki.ParseCert(certPEM)
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf, ca.Certificate()}}
	}
	pin := sha256.Sum256(ca.Certificate().Raw)
	r := &relay{host: "127.0.0.1", pin: pin[:]}
	tests := []struct {
		name, siteID string
		cs           tls.ConnectionState
		refused      string // "" when accepted
	}{
		{"a site before the join", "", serving(pki.RoleSite, "site_b"), ""},
		{"the control plane before the join", "", serving(pki.RoleControlPlane, "control-plane"), "role control-plane"},
		{"its own site", "site_a", serving(pki.RoleSite, "site_a"), ""},
		{"another site", "site_a", serving(pki.RoleSite, "site_b"), "identity site_a"},
		{"a ramdisk", "site_a", serving(pki.RoleRamdisk, "node_a"), "role ramdisk"},
	}
	for _, tt := range tests {
		r.siteID = tt.siteID
		err := r.verifyPinned(tt.cs)
		if tt.refused == "" && err != nil || tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)) {
			t.Errorf("verifyPinned(%s) = %v; want refused naming %q (\"\": accepted)", tt.name, err, tt.refused)
		}
	}
}
