package siteagent

import (
	"crypto/tls"
	"crypto/x509"
	"sync"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// controlPlane is who the agent's servers must be: the control plane's
// listener and Temporal's frontend present its role.
var controlPlane = pki.Want{Roles: []pki.Role{pki.RoleControlPlane}}

// liveCerts holds the agent's current client and serving certificates. The
// live TLS configs (the control plane client, the Temporal client, the
// relay listener) read them through their callbacks on every handshake, so
// a renewal takes effect on the next connection without a restart.
type liveCerts struct {
	mu      sync.RWMutex
	client  *tls.Certificate // leaf only
	serving *tls.Certificate // [leaf, CA]
}

// newLiveCerts pairs the certificates with the agent's key.
func newLiveCerts(keyPEM, certPEM, servingPEM, caPEM []byte) (*liveCerts, error) {
	l := &liveCerts{}
	if err := l.set(keyPEM, certPEM, servingPEM, caPEM); err != nil {
		return nil, err
	}
	return l, nil
}

// set replaces both certificates, after checking that each pairs with the
// key; on an error nothing changes.
func (l *liveCerts) set(keyPEM, certPEM, servingPEM, caPEM []byte) error {
	client, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return errs.Wrap(errs.InvalidState, err, "the agent's certificate does not match its key")
	}
	serving, err := tls.X509KeyPair(append(append([]byte{}, servingPEM...), caPEM...), keyPEM)
	if err != nil {
		return errs.Wrap(errs.InvalidState, err, "the serving certificate does not match the agent's key")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.client, l.serving = &client, &serving
	return nil
}

// replace makes l present n's certificates.
func (l *liveCerts) replace(n *liveCerts) {
	n.mu.RLock()
	client, serving := n.client, n.serving
	n.mu.RUnlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.client, l.serving = client, serving
}

// leaf is the current client certificate, parsed.
func (l *liveCerts) leaf() *x509.Certificate {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.client.Leaf
}

// clientCert is a tls.Config.GetClientCertificate.
func (l *liveCerts) clientCert(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.client, nil
}

// servingCert is a tls.Config.GetCertificate.
func (l *liveCerts) servingCert(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.serving, nil
}

// clientTLS is a client configuration that trusts only pool, checks the
// server under serverName and as the control plane of trustDomain (the
// control plane's listener and its Temporal frontend both present that
// role; another site's serving certificate is refused), and presents the
// current client certificate.
func (l *liveCerts) clientTLS(pool *x509.CertPool, serverName, trustDomain string) (*tls.Config, error) {
	cfg, err := pki.ClientTLS(pool, nil, nil, serverName, trustDomain, controlPlane)
	if err != nil {
		return nil, err
	}
	cfg.GetClientCertificate = l.clientCert
	return cfg, nil
}
