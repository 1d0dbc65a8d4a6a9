package controlplane

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
	"github.com/better-compute/better-compute/internal/frontends"
	"github.com/better-compute/better-compute/internal/startid"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/tserver"
	"github.com/better-compute/better-compute/webui"
)

// Files in the pki dir.
const (
	// controlPlaneKeyFile is the control plane's own key (0600): it serves
	// the agents' listener and the embedded Temporal frontend, and the
	// control plane's Temporal client and the Web UI present it.
	controlPlaneKeyFile = "control-plane.key"
	// temporalCertFile is the embedded frontend's certificate, issued anew at
	// each start for controlPlaneKeyFile.
	temporalCertFile = "temporal-frontend.crt"
)

// startTemporal starts the embedded server or connects to an external one,
// then makes sure the namespace and search attributes exist.
func (cp *ControlPlane) startTemporal(ctx context.Context, key *codec.Keyring) error {
	var tc *tls.Config
	if cp.cfg.TemporalAddress == "" {
		if err := cp.startEmbedded(ctx); err != nil {
			return err
		}
		tc = cp.temporal.ClientTLS()
	} else if cp.cfg.TemporalTLS {
		var err error
		// the first of several frontends: TLS verifies its host
		if tc, err = cp.externalTLS(cp.TemporalAddress()); err != nil {
			return err
		}
	}
	traced, err := tracing.Temporal(cp.cfg.Tracer)
	if err != nil {
		return err
	}
	target, dialOpts := frontends.Target(cp.TemporalAddresses())
	dialOpts = append(dialOpts, grpc.WithChainUnaryInterceptor(startid.Interceptor())) // the API's verbs start under one id (api/metal.go)
	c, err := dial(ctx, client.Options{HostPort: target, Namespace: cp.cfg.TemporalNamespace, Interceptors: traced,
		ConnectionOptions: client.ConnectionOptions{TLS: tc, DialOptions: dialOpts, GrpcCompression: codec.Compression()}, MetricsHandler: cp.metrics.Temporal()}, key, cp.log)
	if err != nil {
		return err
	}
	cp.client = c
	if cp.temporal == nil {
		if err := tserver.EnsureNamespace(ctx, c, cp.cfg.TemporalNamespace); err != nil {
			return err
		}
	}
	return tserver.RegisterSearchAttributes(ctx, c, cp.cfg.TemporalNamespace)
}

// TemporalAddresses are the frontends this process balances over and
// site agents are given: the embedded one, or those of --temporal-address
// (several of one cluster, comma-separated).
func (cp *ControlPlane) TemporalAddresses() []string {
	if cp.temporal != nil {
		return []string{cp.temporal.FrontendAddress()}
	}
	return frontends.Split(cp.cfg.TemporalAddress)
}

// startEmbedded starts the embedded server and its UI; with a CA, its
// frontend speaks mTLS only.
func (cp *ControlPlane) startEmbedded(ctx context.Context) error {
	host, port, uiPort, err := cp.embeddedPorts()
	if err != nil {
		return err
	}
	tlsCfg, err := cp.embeddedTLS(host)
	if err != nil {
		return err
	}
	srv, err := tserver.Start(ctx, tserver.Config{DataDir: cp.cfg.DataDir, Namespace: cp.cfg.TemporalNamespace,
		Host: host, FrontendPort: port, UIPort: uiPort, CodecEndpoint: webui.CodecPath, TLS: tlsCfg,
		UIGate: cp.gate.Wrap, UIWriteActions: cp.cfg.UIWriteActions,
		Logger: cp.cfg.TemporalLogger, LogLevel: cp.cfg.TemporalLogLevel, Metrics: cp.temporalServerMetrics()})
	if err != nil {
		return err
	}
	cp.temporal = srv
	return nil
}

// embeddedPorts are the embedded server's host and frontend port, from
// --temporal-listen, and its Web UI's port, from --ui-listen (-1: off).
func (cp *ControlPlane) embeddedPorts() (host string, port, uiPort int, err error) {
	if host, port, err = splitHostPort(cp.cfg.TemporalListen, "temporal-listen"); err != nil {
		return "", 0, 0, err
	}
	uiPort = -1
	if cp.cfg.UIListen != "off" {
		if _, uiPort, err = splitHostPort(cp.cfg.UIListen, "ui-listen"); err != nil {
			return "", 0, 0, err
		}
	}
	return host, port, uiPort, nil
}

// dial connects to Temporal as opts say (address, namespace, TLS,
// interceptors) with the encrypting payload codec, retrying for up to 30
// seconds while the frontend comes up. The worker made from the client
// takes its interceptors (tracing).
func dial(ctx context.Context, opts client.Options, key *codec.Keyring, log *slog.Logger) (client.Client, error) {
	deadline := time.Now().Add(30 * time.Second)
	dc := key.DataConverter("")
	opts.DataConverter, opts.FailureConverter, opts.Logger = dc, codec.NewFailureConverter(dc), temporalLogger(log)
	addr := opts.HostPort
	for {
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "cannot reach Temporal at %s (check --temporal-address)", addr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// embeddedTLS issues the embedded frontend's serving certificate for host
// (the host of --temporal-listen) and returns the server's TLS settings; nil
// without a CA, when the frontend stays plain.
func (cp *ControlPlane) embeddedTLS(host string) (*tserver.TLS, error) {
	if cp.ca == nil {
		return nil, nil
	}
	keyPath := filepath.Join(cp.cfg.PKIDir, controlPlaneKeyFile)
	certPEM, err := cp.ca.IssueServer(cp.key.Public(), pki.RoleControlPlane, "control-plane", servingHosts(host), pki.MaxTTL)
	if err != nil {
		return nil, err
	}
	certPath := filepath.Join(cp.cfg.PKIDir, temporalCertFile)
	if err := atomicfile.Write(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return &tserver.TLS{CertFile: certPath, KeyFile: keyPath, CAFile: cp.CAFile()}, nil
}

// servingHosts are the names a control-plane serving certificate (the
// agents' listener, the Temporal frontend) carries: its listener's host,
// unless a wildcard, and loopback, which local clients dial.
func servingHosts(host string) []string {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) && !slices.Contains(hosts, host) {
		hosts = append([]string{host}, hosts...)
	}
	return hosts
}

// externalTLS is the client side of mTLS to an external frontend that
// trusts this project's CA: a control-plane certificate for the control
// plane's key, and the server verified against the CA.
func (cp *ControlPlane) externalTLS(addr string) (*tls.Config, error) {
	if cp.ca == nil {
		return nil, errs.New(errs.InvalidState, "--temporal-tls needs the project's CA in %s (share the pki dir of the control plane that serves Temporal, --pki-dir)", cp.cfg.PKIDir)
	}
	certPEM, err := cp.ca.Issue(cp.key.Public(), pki.RoleControlPlane, "control-plane", pki.MaxTTL)
	if err != nil {
		return nil, err
	}
	keyPEM, err := pki.MarshalPrivateKey(cp.key)
	if err != nil {
		return nil, err
	}
	name := cp.cfg.TemporalServerName
	if name == "" {
		if name, _, err = net.SplitHostPort(addr); err != nil {
			return nil, errs.Invalid("temporal-address", "want host:port, got %q", addr)
		}
	}
	return pki.ClientTLS(cp.ca.Pool(), certPEM, keyPEM, name, cp.ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleControlPlane}})
}
