package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

type equaler interface{ Equal(crypto.PublicKey) bool }

func TestKeysRoundTrip(t *testing.T) {
	t.Parallel()
	for name, newKey := range map[string]func() (crypto.Signer, []byte, error){"ecdsa": NewKey, "ed25519": NewEd25519Key} {
		k, keyPEM, err := newKey()
		if err != nil {
			t.Fatalf("%s: new key = %v", name, err)
		}
		parsed, err := ParseKey(keyPEM)
		if err != nil || !parsed.Public().(equaler).Equal(k.Public()) {
			t.Errorf("%s: ParseKey(new key PEM) = %v, want the same key", name, err)
		}
		pubPEM, err := MarshalPublicKey(k.Public())
		if err != nil {
			t.Fatalf("%s: MarshalPublicKey = %v", name, err)
		}
		pub, err := ParsePublicKey(pubPEM)
		if err != nil || !pub.(equaler).Equal(k.Public()) {
			t.Errorf("%s: ParsePublicKey(MarshalPublicKey) = %v, want the same key", name, err)
		}
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := ParseKey(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})); err != nil || !k.Public().(equaler).Equal(ec.Public()) {
		t.Errorf("ParseKey(SEC 1) = %v, want the key", err)
	}
	for _, bad := range [][]byte{nil, []byte("junk"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}})} {
		if _, err := ParseKey(bad); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("ParseKey(%q) = %v, want INVALID_INPUT", bad, err)
		}
		if _, err := ParsePublicKey(bad); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("ParsePublicKey(%q) = %v, want INVALID_INPUT", bad, err)
		}
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "agent", "agent.key")
	k1, err := LoadOrCreateKey(path, NewEd25519Key)
	if err != nil {
		t.Fatalf("LoadOrCreateKey(new) = %v", err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	k2, err := LoadOrCreateKey(path, NewKey)
	if err != nil || !k2.Public().(equaler).Equal(k1.Public()) {
		t.Errorf("LoadOrCreateKey(existing) = %v, want the key made first", err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path, NewKey); !errs.Is(err, errs.InvalidState) {
		t.Errorf("LoadOrCreateKey(mode 0640) = %v, want INVALID_STATE", err)
	}
}

// TestSignedResultVerifiesWithCertifiedKey is the wipe attestation in small: the
// ramdisk signs with its key, the control plane verifies with the key in the
// certificate the CA issued for it.
func TestSignedResultVerifiesWithCertifiedKey(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	for name, newKey := range map[string]func() (crypto.Signer, []byte, error){"ecdsa": NewKey, "ed25519": NewEd25519Key} {
		key := mustKey(t, newKey)
		certPEM, err := ca.Issue(key.Public(), RoleRamdisk, "node_a", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := ParseCert(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		msg := []byte(`{"disk":"wwn-0x5000c500a1b2c3d4","readBack":"passed"}`)
		sig, err := Sign(key, msg)
		if err != nil {
			t.Fatalf("%s: Sign = %v", name, err)
		}
		if err := VerifySignature(PublicKeyOf(cert), msg, sig); err != nil {
			t.Errorf("%s: VerifySignature(good) = %v", name, err)
		}
		tampered := append([]byte{}, msg...)
		tampered[10] ^= 1
		if err := VerifySignature(PublicKeyOf(cert), tampered, sig); !errs.Is(err, errs.Unauthenticated) {
			t.Errorf("%s: VerifySignature(tampered) = %v, want UNAUTHENTICATED", name, err)
		}
		other := mustKey(t, newKey)
		if err := VerifySignature(other.Public(), msg, sig); !errs.Is(err, errs.Unauthenticated) {
			t.Errorf("%s: VerifySignature(other key) = %v, want UNAUTHENTICATED", name, err)
		}
	}
	if err := VerifySignature(ed25519.PublicKey{1, 2}, nil, nil); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("VerifySignature(short ed25519 key) = %v, want UNAUTHENTICATED", err)
	}
	if err := VerifySignature("not a key", nil, nil); !errs.Is(err, errs.Unsupported) {
		t.Errorf("VerifySignature(string) = %v, want UNSUPPORTED", err)
	}
}
