package pki

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/better-compute/better-compute/errs"
)

// ServerTLS returns a server configuration that presents certPEM/keyPEM and
// accepts only clients with a certificate from this CA, valid by the CA's
// clock, whose SPIFFE ID accept wants (with accept.Optional, also clients
// without one); handlers read who called with PeerIdentity. TLS 1.3 only:
// every peer is ours.
func (ca *CA) ServerTLS(certPEM, keyPEM []byte, accept Want) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, errs.Invalid("certificate", "the serving certificate and key do not form a pair: %v", err)
	}
	clientAuth := tls.RequireAndVerifyClientCert
	if accept.Optional {
		clientAuth = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{pair},
		ClientAuth:       clientAuth,
		ClientCAs:        ca.Pool(),
		Time:             ca.now,
		VerifyConnection: VerifyPeer(ca.trustDomain, accept),
	}, nil
}

// ClientTLS returns a client configuration that trusts only caPool and
// accepts the server only when its certificate names serverName and carries
// a SPIFFE ID of trustDomain that want wants (the control plane's role, a
// site's), and presents certPEM/keyPEM. With both empty it presents no
// certificate: an agent that has not joined yet uses that to reach the
// JoinService.
func ClientTLS(caPool *x509.CertPool, certPEM, keyPEM []byte, serverName, trustDomain string, want Want) (*tls.Config, error) {
	if caPool == nil {
		return nil, errs.Invalid("caPool", "a client needs the CA pool to check the server")
	}
	if serverName == "" {
		return nil, errs.Invalid("serverName", "a client needs the server's name to check its certificate")
	}
	if len(want.Roles) == 0 || want.Optional {
		return nil, errs.Invalid("want", "a client must name the role the server's certificate carries")
	}
	cfg := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		RootCAs:          caPool,
		ServerName:       serverName,
		VerifyConnection: VerifyPeer(trustDomain, want),
	}
	if len(certPEM) == 0 && len(keyPEM) == 0 {
		return cfg, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, errs.Invalid("certificate", "the client certificate and key do not form a pair: %v", err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// PeerIdentity returns the role and identity of the peer of a TLS connection
// (r.TLS in an HTTP handler). The peer's certificate must have been verified
// by the handshake; an unverified or missing one is UNAUTHENTICATED.
func PeerIdentity(state tls.ConnectionState, trustDomain string) (Role, string, error) {
	if len(state.PeerCertificates) == 0 {
		return "", "", unauthenticated("the peer presented no certificate")
	}
	if len(state.VerifiedChains) == 0 {
		return "", "", unauthenticated("the peer's certificate was not verified")
	}
	return Identify(state.PeerCertificates[0], trustDomain)
}
