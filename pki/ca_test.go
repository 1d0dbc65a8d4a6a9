package pki

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

const testDomain = "site.example.test"

// newTestCA makes a CA in a fresh temp dir and returns it with the dir.
func newTestCA(t *testing.T, opts ...Option) (*CA, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	ca, err := Init(dir, testDomain, opts...)
	if err != nil {
		t.Fatalf("Init(%s, %s) = %v", dir, testDomain, err)
	}
	return ca, dir
}

// signRaw signs an arbitrary leaf template with the CA's key, for certificates
// Issue refuses to make (wrong trust domain, no SAN, two SANs).
func signRaw(t *testing.T, ca *CA, pub crypto.PublicKey, uris ...string) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "crafted"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("url.Parse(%q) = %v", s, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatalf("CreateCertificate = %v", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("ParseCertificate = %v", err)
	}
	return c
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func TestInitWritesRootAndLoadReadsIt(t *testing.T) {
	t.Parallel()
	ca, dir := newTestCA(t)
	st, err := os.Stat(filepath.Join(dir, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 {
		t.Errorf("mode of %s = %v, want 0600", CAKeyFile, got)
	}
	c := ca.Certificate()
	if !c.IsCA || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("root IsCA=%v MaxPathLen=%d, want a CA with path length 0", c.IsCA, c.MaxPathLen)
	}
	if got := c.NotAfter.Sub(c.NotBefore); got < 9*365*24*time.Hour {
		t.Errorf("root validity = %v, want about ten years", got)
	}
	if got := c.PermittedURIDomains; len(got) != 1 || got[0] != testDomain {
		t.Errorf("root PermittedURIDomains = %v, want [%s]", got, testDomain)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s) = %v", dir, err)
	}
	if got := loaded.TrustDomain(); got != testDomain {
		t.Errorf("Load(%s).TrustDomain() = %q, want %q", dir, got, testDomain)
	}
	if !bytes.Equal(loaded.CertPEM(), ca.CertPEM()) {
		t.Errorf("Load(%s).CertPEM() differs from Init's", dir)
	}
	if _, err := PoolFromPEM(loaded.CertPEM()); err != nil {
		t.Errorf("PoolFromPEM(CertPEM()) = %v", err)
	}
}

func TestInitRefusesExistingCA(t *testing.T) {
	t.Parallel()
	ca, dir := newTestCA(t)
	_, err := Init(dir, "other.example.test")
	if !errs.Is(err, errs.AlreadyExists) || !strings.Contains(err.Error(), filepath.Join(dir, CAKeyFile)) {
		t.Fatalf("second Init(%s) = %v, want ALREADY_EXISTS naming %s", dir, err, CAKeyFile)
	}
	// Only the certificate left behind: still refused, naming it.
	if err := os.Remove(filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	_, err = Init(dir, testDomain)
	if !errs.Is(err, errs.AlreadyExists) || !strings.Contains(err.Error(), CACertFile) {
		t.Fatalf("Init(%s) with ca.crt present = %v, want ALREADY_EXISTS naming %s", dir, err, CACertFile)
	}
	got, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil || !bytes.Equal(got, ca.CertPEM()) {
		t.Errorf("ca.crt after refused Init changed (err %v)", err)
	}
}

func TestInitValidatesTrustDomain(t *testing.T) {
	t.Parallel()
	for _, td := range []string{"", "Site.example.test", "a..b", ".a", "a.", "-a.test", "a-.test",
		"a_b.test", "spiffe://a.test", "a.test/x", "a.test:443", strings.Repeat("a", 64) + ".test"} {
		dir := t.TempDir()
		_, err := Init(dir, td)
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.InvalidInput || e.Field != "trustDomain" {
			t.Errorf("Init(dir, %q) = %v, want INVALID_INPUT trustDomain", td, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("Init(dir, %q) left %d files", td, len(entries))
		}
	}
	for _, td := range []string{"localhost", "site.example.test", "a-1.b2", "x"} {
		if err := ValidateTrustDomain(td); err != nil {
			t.Errorf("ValidateTrustDomain(%q) = %v, want nil", td, err)
		}
	}
}

func TestLoadFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Load(dir)
	if !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "pki init --trust-domain") {
		t.Errorf("Load(empty dir) = %v, want NOT_FOUND telling to run pki init", err)
	}

	_, dir = newTestCA(t)
	keyPath := filepath.Join(dir, CAKeyFile)
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errs.Is(err, errs.InvalidState) {
		t.Errorf("Load with ca.key 0644 = %v, want INVALID_STATE", err)
	}

	// A key from another CA beside this certificate.
	_, other := newTestCA(t)
	otherKey, err := os.ReadFile(filepath.Join(other, CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, otherKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errs.Is(err, errs.InvalidState) || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Load with a foreign key = %v, want INVALID_STATE key does not match", err)
	}
}
