// Package siteagent owns `bcd site`, the site agent: it joins the control
// plane once with a site token (and comes back from its data dir alone after
// that), serves the site's activities as a Temporal worker on the site's task
// queue, serves HTTP boot (iPXE scripts, the ramdisk kernel and initrd, the
// verified image cache) on a plain listener, and relays commands to
// ramdisks over an mTLS listener. It assembles activities/site with
// siteagent/boot, siteagent/cache and siteagent/relay.
package siteagent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/activities/site"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/frontends"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/ramdisk/initramfs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/siteagent/boot"
	"github.com/better-compute/better-compute/siteagent/cache"
	"github.com/better-compute/better-compute/siteagent/pxe"
	"github.com/better-compute/better-compute/siteagent/relay"
)

// DriverFactory opens a BMC driver; the main builds the registry by name.
type DriverFactory = site.DriverFactory

// Discovery is an unknown MAC seen PXE-booting.
type Discovery = boot.Discovery

// Config configures a site agent. Only mains fill it from flags and
// environment.
type Config struct {
	ControlPlaneURL string // the control plane's agents TLS listener, https://…
	CAFile          string // the project CA, to verify the control plane at the first join
	TokenFile       string // the site token; needed only on the first start
	DataDir         string // key, certificates, join settings, boot table, image cache
	BootListen      string // plain HTTP for iPXE: scripts, ramdisk files, image cache
	RelayListen     string // HTTPS with mTLS for ramdisks
	RamdiskDir      string // vmlinuz and initrd.img to serve; optional
	// BootStall is how long a ramdisk boot may show no progress before the
	// command waiting for it fails with BOOT_STALLED (site.DefaultBootStall
	// when zero).
	BootStall time.Duration
	// RamdiskGone is how long a command may wait for a node none of whose
	// ramdisks talks to the relay, with no ramdisk boot of it in progress,
	// before it fails with BOOT_STALLED (site.DefaultRamdiskGone when zero).
	RamdiskGone time.Duration
	// PXE is network boot: proxy DHCP and TFTP for iPXE on the
	// provisioning interface; off when PXE.Interface is "". Its address is
	// the advertised host unless AdvertiseHost is set.
	PXE pxe.Config
	// AdvertiseHost is the host machines reach this agent at (in boot URLs
	// and the relay's serving certificate); by default the listeners' host,
	// or the first non-loopback address when they listen on all.
	AdvertiseHost string
	Drivers       map[string]DriverFactory // by BMC driver name; "ipmi" may be absent
	// Plugins are the plugins this agent serves beside the built-in steps;
	// it announces their site and ramdisk steps to the control plane.
	Plugins []sdk.Plugin
	// TemporalTLS forces the worker to dial Temporal with TLS and the
	// agent's certificate even when the join did not ask for it (a join
	// from before the control plane had a CA, or an external Temporal
	// behind mTLS with the project's CA). The join's answer turns TLS on by
	// itself: the embedded server speaks mTLS whenever there is a CA.
	TemporalTLS bool
	// LookupEnv resolves env:// credentials; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)
	// AllowEnv names the variables env:// credentials may read besides
	// BCD_SECRET_*; the API accepts only BCD_SECRET_* at enroll, so another
	// name serves nodes written to the database by other means (older nodes).
	AllowEnv []string
	// BMCNetworks, when set, are the only networks the agent reaches BMCs
	// in (bcd site --bmc-network): no credential goes to another address.
	BMCNetworks []netip.Prefix
	// BMCGate holds the knobs of the per-BMC circuit breaker (bcd site
	// --bmc-breaker-*); zero fields take the defaults.
	BMCGate site.BMCGateConfig
	// DisableWorker skips the Temporal worker: tests and emulation drive
	// Agent.Activities directly.
	DisableWorker bool
	// Now is the renewal's clock; time.Now when nil.
	Now func() time.Time
	// RenewCheckEvery is how often the agent checks whether its
	// certificate is due for renewal (after a check at start); an hour
	// when zero.
	RenewCheckEvery time.Duration
	// MetricsListen serves /metrics (proxy-DHCP requests, boot milestones,
	// the image cache, relayed commands); "" or "off" for none.
	MetricsListen string
	Logger        *slog.Logger
	// Tracer traces the site's activities (children of the workflow's span,
	// through Temporal) and each command relayed to a ramdisk (tracing.Start);
	// nil for none.
	Tracer trace.TracerProvider
}

// Agent is a running site agent.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	id    *identity
	boot  *boot.Table
	cache *cache.Cache
	relay *relay.Relay
	pxe   *pxe.Server // nil without network boot
	acts  *site.Activities
	// metrics is counted always, served on metricsURL when configured.
	metrics    *metrics.Site
	metricsURL string
	// attempts reports command retries to the control plane.
	attempts *site.AttemptsClient
	// cp is the mTLS client to the control plane; relayHost goes into
	// renewed serving certificates.
	cp        *http.Client
	relayHost string
	// stopRenewal ends the renewal loop; renewalDone closes when it has.
	stopRenewal context.CancelFunc
	renewalDone chan struct{}
	// stopReporting ends the PXE discovery reporter; reportingDone closes
	// when it has.
	stopReporting context.CancelFunc
	reportingDone chan struct{}

	bootURL, relayURL string
	servers           []*http.Server
	cancelServe       context.CancelFunc
	tc                client.Client
	frontends         *frontends.Set // the worker's; guarded by id.mu (a renewal updates it)
	w                 worker.Worker
	errc              chan error
	stopOnce          sync.Once
}

// Run runs a site agent until ctx ends or it fails.
func Run(ctx context.Context, cfg Config) error {
	a, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Stop()
	select {
	case <-ctx.Done():
		return nil
	case err := <-a.errc:
		return err
	}
}

// Start joins (first start only), starts the listeners and the worker, and
// returns the running agent.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the data dir %s", cfg.DataDir)
	}
	m := metrics.NewSite()
	cfg.PXE.Count = m.PXERequest
	mln, err := listenMetrics(cfg.MetricsListen)
	if err != nil {
		return nil, err
	}
	px, err := listenPXE(&cfg)
	if err != nil {
		closeListener(mln)
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, errc: make(chan error, 4), pxe: px}
	var lns []net.Listener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
		closeListener(mln)
		px.Close()
	}
	for _, l := range []struct{ addr, what, flag string }{
		{cfg.BootListen, "iPXE and the image cache", "--boot-listen"},
		{cfg.RelayListen, "the ramdisk relay", "--relay-listen"},
	} {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			closeAll()
			return nil, errs.Wrap(errs.Unavailable, err, "%s cannot listen on %s (pick another with %s)", l.what, l.addr, l.flag)
		}
		lns = append(lns, ln)
	}
	host := advertiseHost(cfg.AdvertiseHost, lns[1].Addr())
	a.bootURL = "http://" + net.JoinHostPort(host, port(lns[0].Addr()))
	a.relayURL = "https://" + net.JoinHostPort(host, port(lns[1].Addr()))
	if err := a.assemble(ctx, host); err != nil {
		closeAll()
		return nil, err
	}
	a.countInto(m)
	if err := a.serve(lns[0], lns[1]); err != nil {
		closeAll()
		return nil, err
	}
	a.serveMetrics(mln)
	a.startRenewal()
	a.startReporting()
	if !cfg.DisableWorker {
		if err := a.startWorker(); err != nil {
			a.Stop()
			return nil, err
		}
	}
	a.log.Info("site agent started", "site", a.id.SiteID, "identity", a.id.Identity,
		"boot", a.bootURL, "relay", a.relayURL, "worker", !cfg.DisableWorker)
	return a, nil
}

func (c *Config) check() error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RenewCheckEvery <= 0 {
		c.RenewCheckEvery = time.Hour
	}
	for _, f := range []struct{ name, v string }{
		{"data-dir", c.DataDir}, {"boot-listen", c.BootListen}, {"relay-listen", c.RelayListen},
		{"control-plane-url", c.ControlPlaneURL},
	} {
		if f.v == "" {
			return errs.Invalid(f.name, "the site agent needs --%s", f.name)
		}
	}
	if c.RamdiskDir != "" { // refused now, not found out when a machine asks for it
		return initramfs.CheckDir(c.RamdiskDir)
	}
	return nil
}

// listenPXE binds network boot when it is configured, before anything
// else happens, so a wrong interface or file or a taken port stops the
// start; machines are told this address unless another is advertised.
func listenPXE(cfg *Config) (*pxe.Server, error) {
	if !cfg.PXE.Enabled() {
		return nil, nil
	}
	px, err := pxe.Listen(cfg.PXE, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if cfg.AdvertiseHost == "" {
		cfg.AdvertiseHost = px.Addr().String()
	}
	return px, nil
}

// assemble loads or makes the agent's identity and builds its parts.
func (a *Agent) assemble(ctx context.Context, host string) error {
	id, err := loadOrJoin(ctx, &a.cfg, host)
	if err != nil {
		return err
	}
	a.id, a.relayHost = id, host
	if leaf, err := pki.ParseCert(id.servingPEM); err == nil && leaf.VerifyHostname(host) != nil {
		a.log.Warn("the relay's serving certificate does not name the advertised host; ramdisks will refuse it",
			"host", host, "dnsNames", leaf.DNSNames, "ips", leaf.IPAddresses)
	}
	if a.boot, err = boot.Open(filepath.Join(a.cfg.DataDir, BootTableFile), a.log); err != nil {
		return err
	}
	if a.cache, err = cache.New(filepath.Join(a.cfg.DataDir, CacheDirName), nil, a.log); err != nil {
		return err
	}
	cp, err := controlPlaneClient(&a.cfg, id)
	if err != nil {
		return err
	}
	a.cp = cp
	joined := func(node string) { a.boot.Mark(node, boot.MilestoneJoined, "") }
	if a.relay, err = relay.New(relay.Config{TrustDomain: id.trustDomain, Join: joinProxy(cp, a.cfg.ControlPlaneURL),
		Renew: renewProxy(cp, a.cfg.ControlPlaneURL), Seen: joined, JoinRefused: a.boot.JoinRefused, Logger: a.log,
		Tracer: a.cfg.Tracer}); err != nil {
		return err
	}
	a.attempts = site.NewAttemptsClient(cp, a.cfg.ControlPlaneURL)
	a.acts = &site.Activities{
		Drivers: a.cfg.Drivers, Secrets: site.NewSecretsClient(cp, a.cfg.ControlPlaneURL), LookupEnv: a.cfg.LookupEnv, AllowEnv: a.cfg.AllowEnv, BMCNetworks: a.cfg.BMCNetworks, BMCs: site.NewBMCGate(a.bmcGateConfig()),
		Boot: a.boot, Cache: a.cache, Relay: a.relay, BootStall: a.cfg.BootStall, RamdiskGone: a.cfg.RamdiskGone, Logger: a.log,
	}
	return nil
}

// bmcGateConfig is the BMC gate's knobs, reporting each BMC's state
// changes to the workflow waiting on it through the control plane.
func (a *Agent) bmcGateConfig() site.BMCGateConfig {
	cfg := a.cfg.BMCGate
	cfg.Report = a.attempts.ReportBMCStatus
	return cfg
}

// Stop stops the worker and the listeners. Safe to call twice.
func (a *Agent) Stop() {
	a.stopOnce.Do(func() {
		if a.w != nil {
			a.w.Stop()
		}
		if a.tc != nil {
			a.tc.Close()
		}
		if a.stopRenewal != nil {
			a.stopRenewal()
			<-a.renewalDone
		}
		if a.stopReporting != nil {
			a.stopReporting()
			<-a.reportingDone
		}
		if a.cancelServe != nil {
			a.cancelServe()
		}
		a.pxe.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range a.servers {
			if err := s.Shutdown(ctx); err != nil {
				s.Close()
			}
		}
		a.log.Info("site agent stopped", "site", a.id.SiteID)
	})
}

// BootURL is the base URL of the boot listener, http://host:port.
func (a *Agent) BootURL() string { return a.bootURL }

// RelayURL is the base URL of the relay, https://host:port.
func (a *Agent) RelayURL() string { return a.relayURL }

// SiteID is the site this agent serves.
func (a *Agent) SiteID() string { return a.id.SiteID }

// Discoveries lists the unknown MACs seen PXE-booting.
func (a *Agent) Discoveries() []Discovery { return a.boot.Discoveries() }

// Activities returns the agent's activities, for tests and emulation that
// drive them without Temporal.
func (a *Agent) Activities() *site.Activities { return a.acts }

func port(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return strconv.Itoa(ta.Port)
	}
	_, p, _ := net.SplitHostPort(addr.String())
	return p
}

// advertiseHost picks the host machines reach the agent at.
func advertiseHost(configured string, addr net.Addr) string {
	if configured != "" {
		return configured
	}
	ta, ok := addr.(*net.TCPAddr)
	if ok && !ta.IP.IsUnspecified() {
		return ta.IP.String()
	}
	ifAddrs, _ := net.InterfaceAddrs()
	for _, ia := range ifAddrs {
		if n, ok := ia.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}

func closeListener(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}

// serveErr reports whether a server's Serve error is a failure, not a stop.
func serveErr(err error) bool { return err != nil && !errors.Is(err, http.ErrServerClosed) }
