package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// MaxTTL caps the validity of a leaf certificate; agents renew before it ends.
const MaxTTL = 30 * 24 * time.Hour

// backdate covers small clock differences between the CA and its peers.
const backdate = time.Minute

// Issue returns, in PEM, a leaf certificate for pub (ECDSA P-256/P-384 or
// Ed25519) whose only name is the URI SAN spiffe://<trust-domain>/<role>/<identity>,
// usable for client and server auth, valid for ttl capped at MaxTTL (and at the
// root's own end).
func (ca *CA) Issue(pub crypto.PublicKey, role Role, identity string, ttl time.Duration) ([]byte, error) {
	return ca.issue(pub, role, identity, nil, ttl)
}

// IssueServer is Issue for a serving certificate: it also carries hosts as DNS
// and IP SANs, so clients can check the name they dialled (the control plane's
// gateway, a site agent's relay). At least one host is required.
func (ca *CA) IssueServer(pub crypto.PublicKey, role Role, identity string, hosts []string, ttl time.Duration) ([]byte, error) {
	if len(hosts) == 0 {
		return nil, errs.Invalid("hosts", "a serving certificate needs at least one DNS name or IP address")
	}
	return ca.issue(pub, role, identity, hosts, ttl)
}

func (ca *CA) issue(pub crypto.PublicKey, role Role, identity string, hosts []string, ttl time.Duration) ([]byte, error) {
	if !role.Valid() {
		return nil, errs.Invalid("role", "unknown role %q; want one of %v", role, Roles())
	}
	if err := ValidateIdentity(identity); err != nil {
		return nil, err
	}
	if err := checkPublicKey(pub); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, errs.Invalid("ttl", "ttl %v must be positive", ttl)
	}
	ttl = min(ttl, MaxTTL)
	dns, ips, err := splitHosts(hosts)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := ca.now()
	notAfter := now.Add(ttl)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"better-compute"}, CommonName: identity},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		URIs:         []*url.URL{SPIFFEID(ca.trustDomain, role, identity)},
		DNSNames:     dns,
		IPAddresses:  ips,
		// BasicConstraintsValid with IsCA false: this key may not sign certificates.
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot sign a certificate for %s/%s", role, identity)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// checkPublicKey accepts the key types agents make: ECDSA on P-256 or P-384, and
// Ed25519 (the ramdisk signs its wipe results with it).
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k == nil || (k.Curve != elliptic.P256() && k.Curve != elliptic.P384()) {
			return errs.Invalid("publicKey", "an ECDSA key must be on P-256 or P-384")
		}
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return errs.Invalid("publicKey", "an Ed25519 key must be %d bytes, not %d", ed25519.PublicKeySize, len(k))
		}
	default:
		return errs.Invalid("publicKey", "key type %T is not accepted; use ECDSA P-256 or Ed25519", pub)
	}
	return nil
}

func splitHosts(hosts []string) ([]string, []net.IP, error) {
	var dns []string
	var ips []net.IP
	for _, h := range hosts {
		c, err := canonicalHost("hosts", h)
		if err != nil {
			return nil, nil, err
		}
		if a, err := netip.ParseAddr(c); err == nil {
			ips = append(ips, net.IP(a.AsSlice()))
			continue
		}
		dns = append(dns, c)
	}
	return dns, ips, nil
}

func randomSerial() (*big.Int, error) {
	// 127 random bits: positive, and unpredictable to whoever asks for a certificate.
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read random bytes for a serial number")
	}
	return s.Add(s, big.NewInt(1)), nil
}

// ParseCert parses the first certificate of a PEM block (INVALID_INPUT otherwise).
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errs.Invalid("certificate", "not a PEM CERTIFICATE block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, errs.Invalid("certificate", "cannot parse the certificate: %v", err)
	}
	return c, nil
}

// Identify returns the role and identity of a leaf certificate: it must carry
// exactly one URI SAN, spiffe://<trustDomain>/<role>/<identity> with a known role
// and a valid identity, and not be a CA. Anything else is UNAUTHENTICATED. It does
// not check signatures or validity: call it on a certificate that TLS or Verify
// has verified.
func Identify(cert *x509.Certificate, trustDomain string) (Role, string, error) {
	if cert == nil {
		return "", "", unauthenticated("no certificate")
	}
	if cert.IsCA {
		return "", "", unauthenticated("a CA certificate is not an identity")
	}
	if len(cert.URIs) != 1 {
		return "", "", unauthenticated("the certificate carries %d URI SANs; want exactly one SPIFFE ID", len(cert.URIs))
	}
	return ParseID(cert.URIs[0], trustDomain)
}

// Verify checks that cert chains to this CA and is valid now (by the CA's clock)
// for client or server auth, and returns its role and identity. The JoinService
// and the wipe-attestation check use it on certificates that did not arrive
// over mTLS.
func (ca *CA) Verify(cert *x509.Certificate) (Role, string, error) {
	if cert == nil {
		return "", "", unauthenticated("no certificate")
	}
	_, err := cert.Verify(x509.VerifyOptions{
		Roots:       ca.Pool(),
		CurrentTime: ca.now(),
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return "", "", errs.Wrap(errs.Unauthenticated, err, "the certificate was not issued by this CA or is not valid now")
	}
	return Identify(cert, ca.trustDomain)
}

// PublicKeyOf returns the certified public key of cert (*ecdsa.PublicKey or
// ed25519.PublicKey for certificates this CA issued).
func PublicKeyOf(cert *x509.Certificate) crypto.PublicKey {
	if cert == nil {
		return nil
	}
	return cert.PublicKey
}
