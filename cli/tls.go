package cli

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// httpClient is the API client: an https --url is verified against the
// system roots, or against the CA certificates of caFile (PEM) when given.
func httpClient(caFile string) (*http.Client, error) {
	hc := &http.Client{Timeout: 2 * time.Minute}
	if caFile == "" {
		return hc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "cannot read --ca-file")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errs.Invalid("ca-file", "%s holds no PEM certificate", caFile)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	hc.Transport = t
	return hc, nil
}
