package controlplane

import (
	"crypto/tls"
	"net"
	"net/http"

	"github.com/better-compute/better-compute/errs"
)

// apiTLS makes the API listener ln speak TLS with serve's --tls-cert and
// --tls-key (a PEM certificate chain and its key), HTTP/2 and HTTP/1.1;
// without them it stays plain HTTP (HTTP/2 without TLS too), as before. It
// sets the API's URL.
func (cp *ControlPlane) apiTLS(ln net.Listener, srv *http.Server) (net.Listener, error) {
	certFile, keyFile := cp.cfg.TLSCert, cp.cfg.TLSKey
	if certFile == "" && keyFile == "" {
		cp.apiURL = "http://" + ln.Addr().String()
		return ln, nil
	}
	if certFile == "" || keyFile == "" {
		ln.Close()
		return nil, errs.Invalid("tls-cert", "--tls-cert and --tls-key go together: give both or neither")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		ln.Close()
		return nil, errs.Wrap(errs.InvalidInput, err, "cannot load --tls-cert %s with --tls-key", certFile)
	}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetHTTP2(true)
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	cp.apiURL = "https://" + ln.Addr().String()
	return tls.NewListener(ln, srv.TLSConfig), nil
}
