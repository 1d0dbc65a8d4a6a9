package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/better-compute/better-compute/errs"
)

// NewKey returns a new ECDSA P-256 key and its PKCS#8 PEM ("PRIVATE KEY"), the
// key of agents that speak mTLS.
func NewKey() (crypto.Signer, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, errs.Wrap(errs.Internal, err, "cannot generate a key")
	}
	return encodeKey(k)
}

// NewEd25519Key returns a new Ed25519 key and its PKCS#8 PEM; the ramdisk uses
// one to sign its wipe results, and it works for mTLS as well.
func NewEd25519Key() (crypto.Signer, []byte, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, errs.Wrap(errs.Internal, err, "cannot generate a key")
	}
	return encodeKey(k)
}

// MarshalPrivateKey encodes a key as PKCS#8 PEM.
func MarshalPrivateKey(k crypto.Signer) ([]byte, error) {
	_, b, err := encodeKey(k)
	return b, err
}

func encodeKey(k crypto.Signer) (crypto.Signer, []byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, errs.Wrap(errs.Internal, err, "cannot encode a key")
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKey parses a PEM private key: PKCS#8 ("PRIVATE KEY") holding ECDSA or
// Ed25519, or SEC 1 ("EC PRIVATE KEY").
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errs.Invalid("key", "not a PEM block")
	}
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, errs.Invalid("key", "PEM block %q is not a private key", b.Type)
	}
	if err != nil {
		return nil, errs.Invalid("key", "cannot parse the private key: %v", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errs.Invalid("key", "key type %T cannot sign", k)
	}
	if err := checkPublicKey(s.Public()); err != nil {
		return nil, err
	}
	return s, nil
}

// LoadOrCreateKey reads the agent's key at path or, when there is none, makes
// one with newKey (NewKey or NewEd25519Key) and writes it with mode 0600 (its
// directory 0700). A key file readable by group or others is refused.
func LoadOrCreateKey(path string, newKey func() (crypto.Signer, []byte, error)) (crypto.Signer, error) {
	k, err := readKeyFile(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	k, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the directory of key file %s", path)
	}
	if err := writeNew(path, keyPEM, 0o600); err != nil {
		if errs.Is(err, errs.AlreadyExists) {
			return readKeyFile(path) // another process made it first: use theirs
		}
		return nil, err
	}
	return k, nil
}

func readKeyFile(path string) (crypto.Signer, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot stat key file %s", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, errs.New(errs.InvalidState, "key file %s has mode %v; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read key file %s", path)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidState, err, "key file %s is unreadable", path)
	}
	return k, nil
}

// MarshalPublicKey returns pub as a PEM "PUBLIC KEY" (PKIX), what an agent sends
// to the JoinService.
func MarshalPublicKey(pub crypto.PublicKey) ([]byte, error) {
	if err := checkPublicKey(pub); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot encode a public key")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKey parses a PEM "PUBLIC KEY" of an accepted type (ECDSA P-256 or
// P-384, Ed25519); anything else is INVALID_INPUT.
func ParsePublicKey(pubPEM []byte) (crypto.PublicKey, error) {
	b, _ := pem.Decode(pubPEM)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errs.Invalid("publicKey", "not a PEM PUBLIC KEY block")
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, errs.Invalid("publicKey", "cannot parse the public key: %v", err)
	}
	if err := checkPublicKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// Sign signs msg with key: Ed25519 over msg itself, ECDSA (ASN.1) over its
// SHA-256. VerifySignature checks what it makes.
func Sign(key crypto.Signer, msg []byte) ([]byte, error) {
	var sig []byte
	var err error
	switch key.Public().(type) {
	case ed25519.PublicKey:
		sig, err = key.Sign(rand.Reader, msg, crypto.Hash(0))
	case *ecdsa.PublicKey:
		d := sha256.Sum256(msg)
		sig, err = key.Sign(rand.Reader, d[:], crypto.SHA256)
	default:
		return nil, errs.New(errs.Unsupported, "cannot sign with a %T key", key.Public())
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot sign")
	}
	return sig, nil
}

// VerifySignature checks a signature made by Sign with the key of pub
// (PublicKeyOf a certificate the CA verified); a bad one is UNAUTHENTICATED.
func VerifySignature(pub crypto.PublicKey, msg, sig []byte) error {
	ok := false
	switch k := pub.(type) {
	case ed25519.PublicKey:
		ok = len(k) == ed25519.PublicKeySize && ed25519.Verify(k, msg, sig)
	case *ecdsa.PublicKey:
		d := sha256.Sum256(msg)
		ok = k != nil && ecdsa.VerifyASN1(k, d[:], sig)
	default:
		return errs.New(errs.Unsupported, "cannot verify with a %T key", pub)
	}
	if !ok {
		return unauthenticated("the signature does not match the certified key")
	}
	return nil
}
