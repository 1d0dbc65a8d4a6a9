package pki

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// File names of the CA in the data dir.
const (
	CAKeyFile  = "ca.key"
	CACertFile = "ca.crt"
)

// CAValidity is how long the root certificate made by Init is valid.
const CAValidity = 10 * 365 * 24 * time.Hour

// CA is the project's certificate authority, loaded from the data dir.
type CA struct {
	cert        *x509.Certificate
	certPEM     []byte
	key         crypto.Signer
	trustDomain string
	now         func() time.Time
}

// Init creates the CA in dir: dir/ca.key (ECDSA P-256, PKCS#8, mode 0600) and
// dir/ca.crt, a self-signed root valid for ten years whose name constraints permit
// only SPIFFE IDs in trustDomain. It refuses to replace an existing CA with
// ALREADY_EXISTS: certificates issued by it would stop working, so the operator
// must move the old files away on purpose.
func Init(dir, trustDomain string, opts ...Option) (*CA, error) {
	if err := ValidateTrustDomain(trustDomain); err != nil {
		return nil, err
	}
	o := buildOptions(opts)
	keyPath, certPath := filepath.Join(dir, CAKeyFile), filepath.Join(dir, CACertFile)
	for _, p := range []string{keyPath, certPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, errs.New(errs.AlreadyExists,
				"%s already exists; a CA is already set up here (move it away deliberately to start a new one: every certificate it issued stops working)", p)
		}
	}
	key, keyPEM, err := NewKey()
	if err != nil {
		return nil, err
	}
	certDER, err := selfSign(key, trustDomain, o.now())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the data dir %s", dir)
	}
	if err := writeNew(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}), 0o644); err != nil {
		os.Remove(keyPath)
		return nil, err
	}
	return Load(dir, opts...)
}

func selfSign(key crypto.Signer, trustDomain string, now time.Time) ([]byte, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"better-compute"}, CommonName: "better-compute CA " + trustDomain},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: trustDomain}},
		// Only SPIFFE IDs of this trust domain below this root. DNS names and IP
		// addresses of serving certificates stay unconstrained: hosts vary.
		PermittedURIDomains:         []string{trustDomain},
		PermittedDNSDomainsCritical: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the CA certificate")
	}
	return der, nil
}

// writeNew creates path with data and mode, failing if it exists.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return errs.New(errs.AlreadyExists, "%s already exists; move it away deliberately first", path)
	}
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot create %s", path)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return errs.Wrap(errs.Internal, err, "cannot write %s", path)
	}
	return nil
}

// Load reads the CA from dir. A missing CA is NOT_FOUND with the command that
// makes one; a key that does not match the certificate, or a key file readable by
// group or others, is refused.
func Load(dir string, opts ...Option) (*CA, error) {
	keyPath, certPath := filepath.Join(dir, CAKeyFile), filepath.Join(dir, CACertFile)
	certPEM, err := readCAFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readCAFile(keyPath)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(keyPath); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, errs.New(errs.InvalidState, "CA key %s has mode %v; run chmod 600 %s", keyPath, st.Mode().Perm(), keyPath)
	}
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidState, err, "CA certificate %s is unreadable", certPath)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidState, err, "CA key %s is unreadable", keyPath)
	}
	return newCA(cert, key, buildOptions(opts))
}

func readCAFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(errs.NotFound,
			"%s does not exist; run `better-compute pki init --trust-domain <domain>` to create the CA", path)
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read %s", path)
	}
	return b, nil
}

func newCA(cert *x509.Certificate, key crypto.Signer, o options) (*CA, error) {
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, errs.New(errs.InvalidState, "the CA certificate is not a CA certificate")
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errs.New(errs.InvalidState, "the CA key does not match the CA certificate")
	}
	td, err := TrustDomainOf(cert)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	return &CA{cert: cert, certPEM: certPEM, key: key, trustDomain: td, now: o.now}, nil
}

// TrustDomain returns the host part of every SPIFFE ID the CA issues.
func (ca *CA) TrustDomain() string { return ca.trustDomain }

// Certificate returns the root certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the root certificate in PEM, for agents' trust stores.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// Pool returns a new pool holding only the root certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// PoolFromPEM returns a pool of the certificates in pemBytes (an agent's copy of
// ca.crt), INVALID_INPUT if it holds none.
func PoolFromPEM(pemBytes []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		return nil, errs.Invalid("caPEM", "no certificate in the CA bundle")
	}
	return p, nil
}
