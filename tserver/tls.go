package tserver

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"time"

	"go.temporal.io/server/common/rpc/encryption"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// TLS turns on mutual TLS on the frontend. Every file is PEM; the key is
// read once at start and never logged.
type TLS struct {
	// CertFile and KeyFile are the frontend's serving certificate and key.
	// The certificate must carry a control-plane SPIFFE ID and name
	// ServerName: the server's own system workers, the Web UI and
	// Server.ClientTLS present it as their client certificate too.
	CertFile, KeyFile string
	// CAFile is the project CA: clients must present a certificate it
	// issued, and the server's own clients verify the frontend with it.
	CAFile string
	// ServerName is the name clients check the frontend's certificate
	// against; "" means the frontend's host.
	ServerName string
}

// frontendTLS is the loaded TLS material of a frontend.
type frontendTLS struct {
	cert        tls.Certificate
	cas         *x509.CertPool
	trustDomain string
	serverName  string
	files       TLS
}

// loadTLS reads t and checks that its certificate is a control-plane
// identity of the CA's trust domain, the one claims are read from.
func loadTLS(t TLS, host string) (*frontendTLS, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "the frontend's certificate %s and key %s do not load as a pair", t.CertFile, t.KeyFile)
	}
	caPEM, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "cannot read the CA file %s", t.CAFile)
	}
	cas, err := pki.PoolFromPEM(caPEM)
	if err != nil {
		return nil, err
	}
	td, err := pki.TrustDomainOfPEM(caPEM)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "%s is not the project's CA", t.CAFile)
	}
	leaf := cert.Leaf
	if role, _, err := pki.Identify(leaf, td); err != nil || role != pki.RoleControlPlane {
		return nil, errs.Invalid("temporal.tls.certFile", "%s is not a control-plane certificate", t.CertFile)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cas, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "%s was not issued by the CA in %s or is not valid now", t.CertFile, t.CAFile)
	}
	f := &frontendTLS{cert: cert, cas: cas, trustDomain: td, serverName: t.ServerName, files: t}
	if f.serverName == "" {
		f.serverName = host
	}
	if err := leaf.VerifyHostname(f.serverName); err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "%s does not name the frontend %s", t.CertFile, f.serverName)
	}
	return f, nil
}

// server is the frontend's listener configuration: TLS 1.3, a client
// certificate from the CA required, of the control plane (the server's own
// workers, the UI) or of a site (its worker; authorizer confines it to its
// own queue). A ramdisk's or a node's certificate is refused at the
// handshake.
func (f *frontendTLS) server() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{f.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    f.cas,
		VerifyConnection: pki.VerifyPeer(f.trustDomain,
			pki.Want{Roles: []pki.Role{pki.RoleControlPlane, pki.RoleSite}}),
	}
}

// client is what the server's own clients (system workers, readiness check,
// the control plane) dial the frontend with: it must present the control
// plane's certificate.
func (f *frontendTLS) client() *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{f.cert},
		RootCAs:          f.cas,
		ServerName:       f.serverName,
		VerifyConnection: pki.VerifyPeer(f.trustDomain, pki.Want{Roles: []pki.Role{pki.RoleControlPlane}}),
	}
}

// tlsProvider gives the server TLS on the frontend only: history, matching
// and worker listen on loopback and speak plain among themselves, and the
// system workers reach the frontend (PublicClient) with the control-plane
// certificate, which the claim mapper makes an admin.
type tlsProvider struct{ f *frontendTLS }

var _ encryption.TLSConfigProvider = tlsProvider{}

func (tlsProvider) GetInternodeServerConfig() (*tls.Config, error) { return nil, nil }
func (tlsProvider) GetInternodeClientConfig() (*tls.Config, error) { return nil, nil }
func (p tlsProvider) GetFrontendServerConfig() (*tls.Config, error) {
	return p.f.server(), nil
}
func (p tlsProvider) GetFrontendClientConfig() (*tls.Config, error) {
	return p.f.client(), nil
}

// GetRemoteClusterClientConfig: the only cluster is this one.
func (p tlsProvider) GetRemoteClusterClientConfig(string) (*tls.Config, error) {
	return p.f.client(), nil
}

// GetExpiringCerts reports nothing: the control plane issues a fresh
// certificate at every start.
func (tlsProvider) GetExpiringCerts(time.Duration) (encryption.CertExpirationMap, encryption.CertExpirationMap, error) {
	return nil, nil, nil
}

// ClientTLS is the TLS configuration that clients of this process (the
// control plane's Temporal client) dial the frontend with: the frontend's
// own control-plane certificate, the CA and the server name. It is nil when
// the frontend listens plain.
func (s *Server) ClientTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.client()
}

// TLSServerName is the name clients check the frontend's certificate
// against, or "" when the frontend listens plain.
func (s *Server) TLSServerName() string {
	if s.tls == nil {
		return ""
	}
	return s.tls.serverName
}
