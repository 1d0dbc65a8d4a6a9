package controlplane

import (
	"crypto/tls"
	"net"
	"net/http"

	"github.com/better-compute/better-compute/errs"
)

// apiCert loads serve's --tls-cert and --tls-key (a PEM certificate chain
// and its key); nil when neither is given. listen calls it before anything
// starts, so a wrong pair stops serve at once.
func (cp *ControlPlane) apiCert() (*tls.Certificate, error) {
	certFile, keyFile := cp.cfg.TLSCert, cp.cfg.TLSKey
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errs.Invalid("tls-cert", "--tls-cert and --tls-key go together: give both or neither")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "cannot load --tls-cert %s with --tls-key", certFile)
	}
	return &cert, nil
}

// apiTLS makes the API listener ln speak TLS with cert (apiCert), HTTP/2
// and HTTP/1.1; without one it stays plain HTTP (HTTP/2 without TLS too).
// It sets the API's URL.
func (cp *ControlPlane) apiTLS(ln net.Listener, srv *http.Server, cert *tls.Certificate) net.Listener {
	if cert == nil {
		cp.apiURL = "http://" + ln.Addr().String()
		return ln
	}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2", "http/1.1"}}
	cp.apiURL = "https://" + ln.Addr().String()
	return tls.NewListener(ln, srv.TLSConfig)
}
