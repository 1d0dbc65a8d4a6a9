package bare

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// Dial connects to Temporal as better-compute's processes do: every payload
// through the encrypting codec with key, failures too, over tc (mutual
// TLS) when it is not nil.
func Dial(ctx context.Context, addr, namespace string, key []byte, tc *tls.Config) (client.Client, error) {
	c, err := client.DialContext(ctx, options(addr, namespace, key, tc))
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "dial Temporal at %s for the baseline", addr)
	}
	return c, nil
}

// options are Dial's client options.
func options(addr, namespace string, key []byte, tc *tls.Config) client.Options {
	dc := codec.NewDataConverter(key)
	return client.Options{HostPort: addr, Namespace: namespace,
		DataConverter: dc, FailureConverter: codec.NewFailureConverter(dc),
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{TLS: tc, GrpcCompression: codec.Compression()}}
}

// SiteTLS is how a site agent of siteID dials the frontend: a certificate
// from ca for a fresh key, as a join issues it, and the frontend checked
// against ca as serverName.
func SiteTLS(ca *pki.CA, siteID, serverName string) (*tls.Config, error) {
	key, keyPEM, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	certPEM, err := ca.Issue(key.Public(), pki.RoleSite, siteID, time.Hour)
	if err != nil {
		return nil, err
	}
	return pki.ClientTLS(ca.Pool(), certPEM, keyPEM, serverName, ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleControlPlane}})
}
