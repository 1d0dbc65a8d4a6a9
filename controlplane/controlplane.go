// Package controlplane assembles `better-compute serve`: PostgreSQL (external
// or a private cluster in the data dir), Temporal (external or embedded, with
// its Web UI), the Connect API and the control-plane Temporal worker. It is
// stateless over Postgres and Temporal: several processes may share them.
package controlplane

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/bodytimeout"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/store"
	"github.com/better-compute/better-compute/store/pgcluster"
	"github.com/better-compute/better-compute/tserver"
	"github.com/better-compute/better-compute/webui"
)

// Components a process may run alone, for scale-out.
const (
	OnlyAPI    = "api"
	OnlyWorker = "worker"
)

// Defaults for Config.
const (
	DefaultListen         = "127.0.0.1:7780"
	DefaultTemporalListen = "127.0.0.1:7233"
	DefaultUIListen       = "127.0.0.1:8233"
	DefaultAgentsListen   = "127.0.0.1:7781"
	DefaultNamespace      = "better-compute"
	DefaultDataDir        = ".better-compute"
	RootTokenFile         = "root-token"
	databaseName          = "better_compute"
)

// Config is everything `serve` takes.
type Config struct {
	DataDir           string
	DatabaseURL       string // "": a private cluster in DataDir/postgres
	TemporalAddress   string // "": an embedded server in DataDir
	TemporalNamespace string
	TemporalListen    string // the embedded frontend's address
	// TemporalTLS dials an external frontend (TemporalAddress) with mTLS: a
	// control-plane certificate from the CA in PKIDir, the server verified
	// against that CA — e.g. another serve's embedded frontend, the pki dir
	// shared. TemporalServerName overrides the name verified.
	TemporalTLS        bool
	TemporalServerName string
	Listen             string // the API's address
	UIListen           string // the embedded Web UI's address; "off" for none
	ConfigFile         string // "": DataDir/config.yaml
	KeyFile            string // "": DataDir/master.key (see KeyFile)
	KeyTransit         string // a Vault/OpenBao transit key-encryption key: UNSUPPORTED
	TLSCert, TLSKey    string // the API over TLS (PEM files); "": plain HTTP
	PKIDir             string // "": DataDir/pki (made by `better-compute pki init`)
	AgentsListen       string // TLS listener for agents (join, secrets); "off" for none
	MetricsListen      string // /metrics; "" or "off" for none (serve's default: DefaultMetricsListen)
	Only               string // "", OnlyAPI or OnlyWorker
	Logger             *slog.Logger
	// TemporalLogger gets the embedded Temporal server's own logs from
	// TemporalLogLevel up (nil: Logger, from warn up).
	TemporalLogger   *slog.Logger
	TemporalLogLevel slog.Leveler

	// UIHosts are more names the Web UI answers to, beside its listen
	// host, localhost and loopback (serve --ui-host).
	UIHosts []string
	// UIWriteActions lets the root tenant use the Web UI's write actions
	// (terminate, reset, signal, …); off, the UI is read-only.
	UIWriteActions bool
	// Tracer traces API calls and, through Temporal, the workflows and
	// activities they start (tracing.Start); nil for none.
	Tracer trace.TracerProvider
	// Plugins are the plugins whose steps and profiles this control plane
	// serves beside the built-ins (a plugin author's own serve binary).
	Plugins []sdk.Plugin
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	cfg        Config
	log        *slog.Logger
	pg         *pgcluster.Cluster
	store      *store.Store
	temporal   *tserver.Server
	client     client.Client
	worker     interface{ Stop() }
	ca         *pki.CA
	key        crypto.Signer // the control plane's own key (with a CA)
	http       *http.Server
	agents     *http.Server
	metrics    *metrics.ControlPlane
	metricsSrv *http.Server
	metricsURL string
	agentsURL  string
	ln         listeners // bound at start, until their servers take them
	// apiCertificate is the API's, from --tls-cert and --tls-key (nil: plain).
	apiCertificate *tls.Certificate
	apiURL         string
	dbURL          string
	tokenPath      string

	gate          *webui.Gate // the Web UI's and the codec endpoints' login
	payloadTenant codec.PayloadTenant
}

// Start starts every component Config asks for. On error, what started is stopped.
func Start(ctx context.Context, cfg Config) (cp *ControlPlane, err error) {
	cfg = withDefaults(cfg)
	if cfg.Only != "" && cfg.Only != OnlyAPI && cfg.Only != OnlyWorker {
		return nil, errs.Invalid("only", "want %q or %q, got %q", OnlyAPI, OnlyWorker, cfg.Only)
	}
	started := &ControlPlane{cfg: cfg, log: cfg.Logger}
	cp = started
	defer func() {
		if err != nil {
			started.Stop() // what started, newest first; cp is nil by now
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	hw, err := config.Load(cfg.ConfigFile)
	if err != nil {
		return nil, err
	}
	if cp.ca, err = loadCA(cfg.PKIDir); err != nil {
		return nil, err
	}
	if cp.ca != nil {
		// One key for every certificate the control plane presents.
		if cp.key, err = pki.LoadOrCreateKey(filepath.Join(cfg.PKIDir, controlPlaneKeyFile), pki.NewKey); err != nil {
			return nil, err
		}
	}
	if err := cp.listen(); err != nil {
		return nil, err
	}
	if err := cp.startStore(ctx); err != nil {
		return nil, err
	}
	key, err := cp.keyring(ctx)
	if err != nil {
		return nil, err
	}
	if err := cp.newGate(key.Codec("").HTTPHandler(), key.PayloadTenant); err != nil {
		return nil, err
	}
	if err := cp.startMetrics(); err != nil {
		return nil, err
	}
	if err := cp.startTemporal(ctx, key); err != nil {
		return nil, err
	}
	if cfg.Only != OnlyAPI {
		if err := cp.startWorker(); err != nil {
			return nil, err
		}
	}
	if cfg.Only != OnlyWorker {
		if err := cp.startAPI(hw.HardwareProfiles, key); err != nil {
			return nil, err
		}
		if err := cp.startAgents(); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

func withDefaults(cfg Config) Config {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs
	}
	if cfg.TemporalNamespace == "" {
		cfg.TemporalNamespace = DefaultNamespace
	}
	if cfg.TemporalListen == "" {
		cfg.TemporalListen = DefaultTemporalListen
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.UIListen == "" {
		cfg.UIListen = DefaultUIListen
	}
	if cfg.AgentsListen == "" {
		cfg.AgentsListen = DefaultAgentsListen
	}
	if cfg.PKIDir == "" {
		cfg.PKIDir = filepath.Join(cfg.DataDir, "pki")
	}
	if cfg.ConfigFile == "" {
		cfg.ConfigFile = filepath.Join(cfg.DataDir, "config.yaml")
	}
	if cfg.KeyFile == "" {
		cfg.KeyFile = keyFileDefault(cfg)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TemporalLogger == nil {
		cfg.TemporalLogger = cfg.Logger
	}
	return cfg
}

// startStore opens Postgres, migrates it, gives it the key file, and makes
// sure tenant root and the root credential exist.
func (cp *ControlPlane) startStore(ctx context.Context) error {
	if err := cp.openStore(ctx); err != nil {
		return err
	}
	if err := cp.useKeyFile(ctx); err != nil {
		return err
	}
	if err := cp.store.EnsureTenant(ctx, api.RootTenant); err != nil {
		return err
	}
	cp.tokenPath = filepath.Join(cp.cfg.DataDir, RootTokenFile)
	return ensureRootToken(ctx, cp.store, cp.tokenPath)
}

// openStore opens Postgres (an external one, or the private cluster in the
// data dir, adopted when another process runs it) and migrates it.
func (cp *ControlPlane) openStore(ctx context.Context) error {
	url := cp.cfg.DatabaseURL
	if url == "" {
		pg, err := pgcluster.Start(ctx, filepath.Join(cp.cfg.DataDir, "postgres"), cp.log)
		if err != nil {
			return err
		}
		cp.pg = pg
		if err := pg.CreateDatabase(ctx, databaseName); err != nil {
			return err
		}
		url = pg.URL(databaseName)
	}
	s, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	cp.store, cp.dbURL = s, url
	return s.Migrate(ctx)
}

// stopStore closes the store and stops the private cluster unless another
// process ran it first.
func (cp *ControlPlane) stopStore() {
	if cp.store != nil {
		cp.store.Close()
	}
	if cp.pg != nil && !cp.pg.Adopted() {
		if err := cp.pg.Stop(); err != nil {
			cp.log.Warn("stop PostgreSQL", "err", err)
		}
	}
}

func (cp *ControlPlane) startAPI(hw config.HardwareProfiles, key *codec.Keyring) error {
	// Profiles resolve against the plugins' own steps (with their checks)
	// beside those the running workers publish.
	reg, err := steps.Registry(cp.cfg.Plugins...)
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "the control plane's plugins")
	}
	srv := api.New(api.Config{Store: cp.store, Temporal: cp.client, DataConverter: key.DataConverter(""), Namespace: cp.cfg.TemporalNamespace,
		Hardware: hw, Logger: cp.log, Interceptors: cp.apiInterceptors(), Steps: reg})
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	mux.Handle("/codec/", loopbackOnly(http.StripPrefix("/codec", cp.guardCodec(key.Codec("").HTTPHandler(cp.uiOrigins()...)))))
	// Headers and body each have a bound: a client trickling either holds a
	// connection seconds, not minutes.
	cp.http = &http.Server{Handler: bodytimeout.Handler(mux, bodytimeout.Default), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(cp.log.Handler(), slog.LevelWarn)}
	cp.http.Protocols = new(http.Protocols)
	cp.http.Protocols.SetHTTP1(true)
	cp.http.Protocols.SetUnencryptedHTTP2(true)
	ln := cp.apiTLS(take(&cp.ln.api), cp.http, cp.apiCertificate)
	hs := cp.http // Stop may clear cp.http before this goroutine runs
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cp.log.Error("API server stopped", "err", err)
		}
	}()
	return nil
}

// apiInterceptors wrap every API call: the trace span outermost (it covers
// the rest), then the metrics.
func (cp *ControlPlane) apiInterceptors() []connect.Interceptor {
	if t := tracing.Connect(cp.cfg.Tracer); t != nil {
		return []connect.Interceptor{t, cp.metrics.Interceptor()}
	}
	return []connect.Interceptor{cp.metrics.Interceptor()}
}

// loopbackOnly serves the payload codec only to local callers: it decrypts
// workflow payloads, so it is for the Web UI on this machine.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "the payload codec answers only on loopback", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func splitHostPort(addr, flag string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || port < 0 || port > 65535 {
		return "", 0, errs.Invalid(flag, "want host:port, got %q", addr)
	}
	return host, port, nil
}

// APIURL is the API's base URL ("" when this process runs no API).
func (cp *ControlPlane) APIURL() string { return cp.apiURL }

// TemporalAddress is the first frontend of TemporalAddresses: the one
// TLS verifies and the banner names.
func (cp *ControlPlane) TemporalAddress() string {
	if cp.temporal != nil {
		return cp.temporal.FrontendAddress()
	}
	first, _, _ := strings.Cut(cp.cfg.TemporalAddress, ",")
	return strings.TrimSpace(first)
}

// Client is this process's Temporal client.
func (cp *ControlPlane) Client() client.Client { return cp.client }

// DatabaseURL is the PostgreSQL this process uses (it may hold a password).
func (cp *ControlPlane) DatabaseURL() string { return cp.dbURL }

// Store is this process's store.
func (cp *ControlPlane) Store() *store.Store { return cp.store }

// RootTokenPath is where the root credential is.
func (cp *ControlPlane) RootTokenPath() string { return cp.tokenPath }

// Stop stops every component, newest first. Safe to call twice.
func (cp *ControlPlane) Stop() {
	defer cp.stopMetrics()
	cp.ln.close()
	if cp.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = cp.http.Shutdown(ctx)
		cancel()
		cp.http = nil
	}
	if cp.agents != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = cp.agents.Shutdown(ctx)
		cancel()
		cp.agents = nil
	}
	if cp.worker != nil {
		cp.worker.Stop()
		cp.worker = nil
	}
	if cp.client != nil {
		cp.client.Close()
		cp.client = nil
	}
	if cp.temporal != nil {
		if err := cp.temporal.Stop(); err != nil {
			cp.log.Warn("stop Temporal", "err", err)
		}
		cp.temporal = nil
	}
	if cp.store != nil {
		cp.store.Close()
		cp.store = nil
	}
	if cp.pg != nil {
		if err := cp.pg.Stop(); err != nil {
			cp.log.Warn("stop PostgreSQL", "err", err)
		}
		cp.pg = nil
	}
}

// Run starts the control plane, prints where everything is to out, and
// serves until ctx is done.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	started := time.Now()
	cp, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer cp.Stop()
	cp.PrintBanner(out, time.Since(started))
	<-ctx.Done()
	cp.log.Info("shutting down")
	return nil
}
