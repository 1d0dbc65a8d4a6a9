package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// renewalTokenID is the token id a renewed certificate is recorded under:
// no token was consumed, the previous certificate admitted it.
const renewalTokenID = "renewal"

// Renew gives a site agent or an installed machine's bcd node a fresh
// certificate for the key and identity of the valid, unrevoked certificate
// it calls with over mTLS. Ramdisk certificates live one boot: refused.
func (s join) Renew(ctx context.Context, req *connect.Request[v1.RenewRequest]) (*connect.Response[v1.JoinResponse], error) {
	st, ok := ctx.Value(tlsStateKey{}).(*tls.ConnectionState)
	if !ok || len(st.PeerCertificates) == 0 {
		return nil, errs.New(errs.Unauthenticated, "renewal needs the agent's current certificate over mutual TLS; an agent whose certificate expired joins again with a new site token")
	}
	out, err := s.renew(ctx, st.PeerCertificates[0], req.Msg.ServeHosts, "")
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// renew certifies cert's key and identity afresh. viaSite, when set, is the
// site agent that forwarded the renewal of a node of its site (its relay
// checked that the node holds the key): only such a node's is renewed.
func (s join) renew(ctx context.Context, cert *x509.Certificate, serveHosts []string, viaSite string) (*v1.JoinResponse, error) {
	role, identity, err := s.a.CA.Verify(cert)
	if err != nil {
		return nil, errs.Wrap(errs.Unauthenticated, err, "the certificate presented for renewal is not valid: an agent whose certificate expired joins again with a new token")
	}
	if role != pki.RoleSite && role != pki.RoleNode || viaSite != "" && role != pki.RoleNode {
		return nil, errs.New(errs.PermissionDenied, "only site agents and installed machines renew certificates, and a site forwards only its nodes'; a %s certificate is not renewed here (a ramdisk's lives one boot)", role)
	}
	serial := cert.SerialNumber.Text(16)
	revoked, err := s.store.CertificateRevoked(ctx, serial)
	if err != nil {
		return nil, err
	}
	if revoked {
		return nil, errs.New(errs.Unauthenticated, "the certificate %s is revoked or unknown: join again with a new token", serial)
	}
	tenant, site, err := s.store.CertificateOwner(ctx, serial)
	if err != nil {
		return nil, err
	}
	claimed := identity // a site's certificate names its site; a forwarded node's, the site that forwards it
	if viaSite != "" {
		claimed = viaSite
	}
	if (role == pki.RoleSite || viaSite != "") && site != claimed {
		return nil, errs.New(errs.Unauthenticated, "the certificate %s was recorded for site %s, not %s", serial, site, claimed)
	}
	pub := pki.PublicKeyOf(cert)
	pubPEM, err := pki.MarshalPublicKey(pub)
	if err != nil {
		return nil, err
	}
	adm := admission{role: role, tenant: tenant, site: site, identity: identity, token: renewalTokenID, ttl: siteCertTTL}
	if role == pki.RoleNode {
		adm.ttl = nodeCertTTL
	}
	out, c, err := s.certify(ctx, adm, pub, pubPEM, serveHosts, true)
	if err == nil {
		err = s.store.RecordCertificate(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "agent renewed its certificate", "role", role, "identity", identity, "site", site, "previousSerial", serial, "via", viaSite)
	return out, nil
}
