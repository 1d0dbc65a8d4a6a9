package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// Want is who a TLS peer must be: a certificate of the trust domain whose
// SPIFFE ID has one of Roles and, when Identity is set, that identity. The
// CA and the host name only prove a certificate is ours; every issued
// certificate is, a site's serving certificate too, so the role is what
// tells the control plane from one tenant's site posing as it.
type Want struct {
	Roles    []Role
	Identity string
	// Optional lets a peer present no certificate at all: a server whose
	// clients may come before they have one (joins). A certificate, when
	// given, must still match.
	Optional bool
}

// String names the wanted roles (and identity) for errors.
func (w Want) String() string {
	roles := make([]string, len(w.Roles))
	for i, r := range w.Roles {
		roles[i] = string(r)
	}
	s := "role " + strings.Join(roles, " or ")
	if w.Identity != "" {
		s += " with identity " + w.Identity
	}
	return s
}

// VerifyPeer returns a tls.Config.VerifyConnection that accepts the peer
// only when its certificate, verified by the handshake, carries a SPIFFE ID
// of trustDomain that w wants. Every tls.Config of the project that talks
// to its own peers sets it; ClientTLS and ServerTLS require it.
func VerifyPeer(trustDomain string, w Want) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 && w.Optional {
			return nil
		}
		role, id, err := PeerIdentity(cs, trustDomain)
		if err != nil {
			return err
		}
		return w.match(role, id)
	}
}

// CheckPeer is VerifyPeer for a leaf verified some other way (a ramdisk
// checks its site's chain against a pinned CA by hand).
func CheckPeer(leaf *x509.Certificate, trustDomain string, w Want) error {
	role, id, err := Identify(leaf, trustDomain)
	if err != nil {
		return err
	}
	return w.match(role, id)
}

func (w Want) match(role Role, id string) error {
	if len(w.Roles) == 0 {
		return errs.New(errs.Internal, "no role is wanted of the peer (a tls.Config without its Want)")
	}
	if !slices.Contains(w.Roles, role) || w.Identity != "" && id != w.Identity {
		return errs.New(errs.PermissionDenied,
			"the peer's certificate is for role %s with identity %s; want %s (a certificate of another role is not accepted here)", role, id, w)
	}
	return nil
}

// TrustDomainOf returns the trust domain of a CA certificate: the host of
// its one spiffe://<trust-domain> URI SAN, as Init writes it. Agents that
// hold only ca.crt read the trust domain their peers must be in from it.
func TrustDomainOf(ca *x509.Certificate) (string, error) {
	if ca == nil || !ca.IsCA || len(ca.URIs) != 1 || ca.URIs[0].Scheme != "spiffe" || ca.URIs[0].Path != "" {
		return "", errs.New(errs.InvalidState, "the CA certificate does not carry exactly one spiffe://<trust-domain> URI")
	}
	td := ca.URIs[0].Host
	if err := ValidateTrustDomain(td); err != nil {
		return "", errs.Wrap(errs.InvalidState, err, "the CA certificate's trust domain is malformed")
	}
	return td, nil
}

// TrustDomainOfPEM is TrustDomainOf for the first certificate of caPEM.
func TrustDomainOfPEM(caPEM []byte) (string, error) {
	c, err := ParseCert(caPEM)
	if err != nil {
		return "", err
	}
	return TrustDomainOf(c)
}

// short quotes at most 64 bytes of s: errors never echo a long input.
func short(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", strings.ToValidUTF8(s[:64], ""))
	}
	return fmt.Sprintf("%q", s)
}
