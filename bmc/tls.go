package bmc

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// TLS says how a driver checks a BMC's HTTPS certificate. The zero value
// verifies it against the site agent's system roots, with the host name.
// It holds no secret: a CA certificate and a public key pin are public, so
// a TLS travels in commands and shows on the node.
type TLS struct {
	// CAPEM holds the PEM CA certificates the BMC's certificate must chain
	// to (enroll --bmc-ca-file), instead of the system roots.
	CAPEM string `json:"caPem,omitempty"`
	// SPKIPin is the base64 SHA-256 of the BMC certificate's
	// SubjectPublicKeyInfo (enroll --bmc-tls-pin). A certificate with that
	// key is accepted whoever signed it and whatever names it holds: the key
	// is what a self-signed BMC can be known by.
	SPKIPin string `json:"spkiPin,omitempty"`
	// Insecure accepts any certificate (enroll --bmc-insecure): a lab
	// opt-out, shown on the node.
	Insecure bool `json:"insecure,omitempty"`
}

// The enroll flags that set TLS, named in errors that tell an operator what to do.
const (
	FlagCAFile   = "--bmc-ca-file"
	FlagTLSPin   = "--bmc-tls-pin"
	FlagInsecure = "--bmc-insecure"
)

// maxCAPEM bounds a CA bundle: a few certificates, never a whole trust store.
const maxCAPEM = 64 << 10

// IsZero reports whether t asks for nothing but default verification.
func (t TLS) IsZero() bool { return t == TLS{} }

// Check refuses, with INVALID_INPUT naming the field under prefix
// ("bmc.tls"), settings that cannot work: CA PEM without a certificate, a
// pin that is not the base64 of 32 bytes, insecure together with a CA or a
// pin, or any setting for an address that does not speak HTTPS.
func (t TLS) Check(prefix string, addr Address) error {
	if t.IsZero() {
		return nil
	}
	if addr.Scheme != "https" {
		return errs.Invalid(prefix, "a %s BMC address does not use HTTPS: its TLS settings (%s, %s, %s) do not apply", schemeName(addr), FlagCAFile, FlagTLSPin, FlagInsecure)
	}
	if t.Insecure && (t.CAPEM != "" || t.SPKIPin != "") {
		return errs.Invalid(prefix+".insecure", "insecure accepts any certificate: give it alone, or a CA or a pin without it")
	}
	if t.CAPEM != "" {
		if _, err := caPool(t.CAPEM); err != nil {
			return errs.Invalid(prefix+".caPem", "%v", err)
		}
	}
	if t.SPKIPin != "" {
		if _, err := decodePin(t.SPKIPin); err != nil {
			return errs.Invalid(prefix+".spkiPin", "%v", err)
		}
	}
	return nil
}

func schemeName(a Address) string {
	if a.Driver == DriverIPMI {
		return "ipmi"
	}
	return a.Scheme + "://"
}

// ClientConfig returns the tls.Config that checks a BMC as t says. t must
// have passed Check.
func (t TLS) ClientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case t.Insecure:
		cfg.InsecureSkipVerify = true //nolint:gosec // the operator's explicit lab opt-out, shown on the node
	case t.SPKIPin != "":
		want, err := decodePin(t.SPKIPin)
		if err != nil {
			return nil, errs.Invalid("bmc.tls.spkiPin", "%v", err)
		}
		// The pin replaces chain and name checks, so they are skipped and
		// the leaf's key is compared in VerifyConnection, which still runs.
		cfg.InsecureSkipVerify = true //nolint:gosec // verified by the pin below
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyPin(cs, want) }
	case t.CAPEM != "":
		pool, err := caPool(t.CAPEM)
		if err != nil {
			return nil, errs.Invalid("bmc.tls.caPem", "%v", err)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// PinMismatchError is a BMC certificate whose key is not the pinned one.
type PinMismatchError struct{ Got, Want string }

func (e *PinMismatchError) Error() string {
	return fmt.Sprintf("the BMC's public key pin is %s, not the enrolled %s", e.Got, e.Want)
}

func verifyPin(cs tls.ConnectionState, want []byte) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the BMC presented no certificate")
	}
	got := sha256.Sum256(cs.PeerCertificates[0].RawSubjectPublicKeyInfo)
	if string(got[:]) != string(want) {
		return &PinMismatchError{Got: base64.StdEncoding.EncodeToString(got[:]), Want: base64.StdEncoding.EncodeToString(want)}
	}
	return nil
}

// SPKIPin returns a certificate's pin as TLS.SPKIPin takes it.
func SPKIPin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func decodePin(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "sha256//"))
	if err != nil || len(b) != sha256.Size {
		return nil, errors.New("the pin is not the base64 SHA-256 of a public key (44 characters: openssl x509 -in CERT -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)")
	}
	return b, nil
}

// caPool parses PEM CA certificates; every block must be a certificate.
func caPool(pemText string) (*x509.CertPool, error) {
	if len(pemText) > maxCAPEM {
		return nil, fmt.Errorf("the CA file is %d bytes; the limit is %d", len(pemText), maxCAPEM)
	}
	pool := x509.NewCertPool()
	rest, n := []byte(pemText), 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("the CA file holds a %q PEM block; give certificates only", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the CA file does not parse: %v", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("the CA file is not PEM certificates (-----BEGIN CERTIFICATE-----)")
	}
	return pool, nil
}

// String shows how a BMC's certificate is checked, the way metal get shows it.
func (t TLS) String() string {
	switch {
	case t.Insecure:
		return "insecure (any certificate accepted)"
	case t.SPKIPin != "":
		return "pinned sha256/" + strings.TrimPrefix(t.SPKIPin, "sha256//")
	case t.CAPEM != "":
		return "verified against the enrolled CA"
	}
	return "verified against the system roots"
}
