package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/google/go-cmp/cmp"
)

func mustKey(t *testing.T, newKey func() (crypto.Signer, []byte, error)) crypto.Signer {
	t.Helper()
	k, _, err := newKey()
	if err != nil {
		t.Fatalf("new key = %v", err)
	}
	return k
}

func TestIssueVerifyIdentifyRoundTrip(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	tests := []struct {
		role     Role
		identity string
		newKey   func() (crypto.Signer, []byte, error)
	}{
		{RoleSite, "site_01k5w0000000000000000000000", NewKey},
		{RoleRamdisk, "node_01k5w0000000000000000000000", NewEd25519Key},
		{RoleNode, "node_01k5w0000000000000000000001", NewKey},
		{RoleControlPlane, "cp-1.example.test", NewEd25519Key},
	}
	for _, tt := range tests {
		key := mustKey(t, tt.newKey)
		certPEM, err := ca.Issue(key.Public(), tt.role, tt.identity, time.Hour)
		if err != nil {
			t.Fatalf("Issue(%s, %s) = %v", tt.role, tt.identity, err)
		}
		cert, err := ParseCert(certPEM)
		if err != nil {
			t.Fatalf("ParseCert(Issue(%s)) = %v", tt.role, err)
		}
		role, id, err := ca.Verify(cert)
		if err != nil || role != tt.role || id != tt.identity {
			t.Errorf("Verify(Issue(%s, %s)) = %s, %s, %v; want %s, %s", tt.role, tt.identity, role, id, err, tt.role, tt.identity)
		}
		want := "spiffe://" + testDomain + "/" + string(tt.role) + "/" + tt.identity
		if len(cert.URIs) != 1 || cert.URIs[0].String() != want || len(cert.DNSNames) != 0 {
			t.Errorf("Issue(%s) SANs = %v %v, want only %s", tt.role, cert.URIs, cert.DNSNames, want)
		}
		if diff := cmp.Diff([]string{"client", "server"}, ekus(cert)); diff != "" {
			t.Errorf("Issue(%s) EKUs (-want +got):\n%s", tt.role, diff)
		}
		if cert.IsCA {
			t.Errorf("Issue(%s) made a CA certificate", tt.role)
		}
		if pub, ok := PublicKeyOf(cert).(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
			t.Errorf("PublicKeyOf(Issue(%s)) is not the key it was issued for", tt.role)
		}
	}
}

// ekus names the extended key usages of c, to compare with cmp.Diff.
func ekus(c *x509.Certificate) []string {
	var out []string
	for _, u := range c.ExtKeyUsage {
		switch u {
		case x509.ExtKeyUsageClientAuth:
			out = append(out, "client")
		case x509.ExtKeyUsageServerAuth:
			out = append(out, "server")
		default:
			out = append(out, fmt.Sprint(u))
		}
	}
	return out
}

// asErrs returns err as *errs.Error, or nil.
func asErrs(err error) *errs.Error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func TestIssueSerialsAreRandomAndTTLIsCapped(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	_, dir := newTestCA(t, WithClock(func() time.Time { return now }))
	ca, err := Load(dir, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	pub := mustKey(t, NewKey).Public()
	a, err := ca.Issue(pub, RoleNode, "node_a", 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Issue(pub, RoleNode, "node_a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca1, _ := ParseCert(a)
	cb, _ := ParseCert(b)
	if got := ca1.NotAfter; !got.Equal(now.Add(MaxTTL)) {
		t.Errorf("Issue(ttl 1y).NotAfter = %v, want %v (capped at MaxTTL)", got, now.Add(MaxTTL))
	}
	if got := cb.NotAfter; !got.Equal(now.Add(time.Hour)) {
		t.Errorf("Issue(ttl 1h).NotAfter = %v, want %v", got, now.Add(time.Hour))
	}
	if ca1.SerialNumber.Cmp(cb.SerialNumber) == 0 || ca1.SerialNumber.BitLen() < 64 {
		t.Errorf("serials %v and %v, want distinct random ones", ca1.SerialNumber, cb.SerialNumber)
	}
}

func TestIssueRefusesBadInput(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	ec := mustKey(t, NewKey).Public()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		pub      crypto.PublicKey
		role     Role
		identity string
		ttl      time.Duration
		field    string
	}{
		{"unknown role", ec, "admin", "site_a", time.Hour, "role"},
		{"empty identity", ec, RoleSite, "", time.Hour, "identity"},
		{"identity with slash", ec, RoleSite, "site_a/b", time.Hour, "identity"},
		{"identity upper case", ec, RoleSite, "Site_a", time.Hour, "identity"},
		{"identity dot dot", ec, RoleSite, "..", time.Hour, "identity"},
		{"zero ttl", ec, RoleSite, "site_a", 0, "ttl"},
		{"rsa key", &rsaKey.PublicKey, RoleSite, "site_a", time.Hour, "publicKey"},
		{"p224 key", &p224.PublicKey, RoleSite, "site_a", time.Hour, "publicKey"},
		{"nil key", nil, RoleSite, "site_a", time.Hour, "publicKey"},
	}
	for _, tt := range tests {
		_, err := ca.Issue(tt.pub, tt.role, tt.identity, tt.ttl)
		if e := asErrs(err); e == nil || e.Kind != errs.InvalidInput || e.Field != tt.field {
			t.Errorf("%s: Issue = %v, want INVALID_INPUT %s", tt.name, err, tt.field)
		}
	}
}

func TestIssueServerCarriesHosts(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	pub := mustKey(t, NewKey).Public()
	certPEM, err := ca.IssueServer(pub, RoleControlPlane, "cp-1", []string{"cp.example.test", "localhost.", "127.0.0.1", "::1"}, time.Hour)
	if err != nil {
		t.Fatalf("IssueServer = %v", err)
	}
	cert, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cp.example.test", "localhost"}, cert.DNSNames); diff != "" {
		t.Errorf("IssueServer DNSNames (-want +got):\n%s", diff)
	}
	if len(cert.IPAddresses) != 2 || !cert.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !cert.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Errorf("IssueServer IPAddresses = %v, want [127.0.0.1 ::1]", cert.IPAddresses)
	}
	for _, host := range []string{"cp.example.test", "127.0.0.1", "::1"} {
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("VerifyHostname(%s) = %v", host, err)
		}
	}
	if role, id, err := ca.Verify(cert); err != nil || role != RoleControlPlane || id != "cp-1" {
		t.Errorf("Verify(IssueServer) = %s, %s, %v; want control-plane, cp-1", role, id, err)
	}
	for _, hosts := range [][]string{nil, {"bad host"}, {"*.example.test"}, {"fe80::1%eth0"}} {
		if _, err := ca.IssueServer(pub, RoleSite, "site_a", hosts, time.Hour); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("IssueServer(hosts %q) = %v, want INVALID_INPUT", hosts, err)
		}
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	ca, dir := newTestCA(t)
	other, _ := newTestCA(t)
	pub := mustKey(t, NewKey).Public()
	fromOther, err := other.Issue(pub, RoleSite, "site_a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Issued two hours ago for one hour: expired by the real clock.
	past, err := Load(dir, WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	expired, err := past.Issue(pub, RoleSite, "site_a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cert []byte
	}{
		{"another CA", fromOther},
		{"expired", expired},
		{"wrong trust domain (name constraints)", pemOf(signRaw(t, ca, pub, "spiffe://other.example.test/site/site_a"))},
		{"no SAN", pemOf(signRaw(t, ca, pub))},
		{"two SANs", pemOf(signRaw(t, ca, pub, "spiffe://"+testDomain+"/site/site_a", "spiffe://"+testDomain+"/node/node_a"))},
		{"unknown role", pemOf(signRaw(t, ca, pub, "spiffe://"+testDomain+"/admin/site_a"))},
		{"the root itself", ca.CertPEM()},
	}
	for _, tt := range tests {
		cert, err := ParseCert(tt.cert)
		if err != nil {
			t.Fatal(err)
		}
		if role, id, err := ca.Verify(cert); !errs.Is(err, errs.Unauthenticated) {
			t.Errorf("Verify(%s) = %s, %s, %v; want UNAUTHENTICATED", tt.name, role, id, err)
		}
	}
	// The root's name constraints alone refuse a foreign trust domain, whoever
	// signed it: a stolen CA key cannot mint IDs for another domain unnoticed.
	foreign := signRaw(t, ca, pub, "spiffe://other.example.test/site/site_a")
	if _, err := foreign.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Errorf("x509 Verify(spiffe://other.example.test/…) = nil, want a name-constraint error")
	}
	if _, _, err := ca.Verify(nil); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("Verify(nil) = %v, want UNAUTHENTICATED", err)
	}
}
