// Package tserver owns the Temporal server that better-compute embeds: a
// single-process cluster on one SQLite file in the data directory (or in
// memory for tests), its namespace and custom search attributes, and the
// Temporal Web UI beside it. It is the only package (with
// internal/testtemporal) that imports go.temporal.io/server, whose link is
// slow; code that only needs the search attribute names imports
// tserver/searchattrs instead.
package tserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/tserver/searchattrs"
)

// Config says where and how to run the embedded server.
type Config struct {
	// DataDir holds the SQLite file DataDir/temporal.db (WAL mode). "" keeps
	// everything in memory (tests).
	DataDir string
	// Namespace is created at start; "" means "default".
	Namespace string
	// Host is the IP the frontend and the UI listen on; "" means 127.0.0.1.
	Host string
	// FrontendPort is the gRPC port; 0 picks a free one.
	FrontendPort int
	// UIPort is the Web UI's port: 0 means FrontendPort+1000 if free, else a
	// free port; -1 means no UI.
	UIPort int
	// CodecEndpoint is an optional URL the UI calls to decode payloads
	// (see package codec).
	CodecEndpoint string
	// UIGate fronts the UI (webui.Gate.Wrap: login, Host check, read-only);
	// the UI does not start without one.
	UIGate func(http.Handler) http.Handler
	// UIWriteActions shows the UI's write actions (terminate, reset, …);
	// the gate decides who may use them.
	UIWriteActions bool
	// TLS, when set, makes the frontend speak mutual TLS only, with a claim
	// mapper and an authorizer: control-plane certificates may do
	// everything, a site's certificate only work its own site's task queue.
	// nil keeps the frontend plain and open to whoever reaches it.
	TLS *TLS
	// Logger receives the server's own logs from LogLevel up; nil discards them.
	Logger *slog.Logger
	// LogLevel is the least level of the server's own logs that Logger
	// gets; nil means warn (the server logs a great deal at info).
	LogLevel slog.Leveler
	// Metrics, when set, gets the server's own metrics (see metricsOption);
	// nil records none.
	Metrics prometheus.Registerer
}

// Server is a running embedded Temporal server.
type Server struct {
	temporal temporal.Server
	ui       *http.Server
	frontend string
	uiURL    string
	tls      *frontendTLS // nil: plain
	log      *slog.Logger
	logLevel *slog.LevelVar // the server's own logs: from cfg.LogLevel up, none while stopping
	lock     *os.File       // holds the data directory's lock; nil in memory

	stopOnce sync.Once
	stopErr  error
}

// startTimeout bounds the wait for the frontend and the UI to answer.
const startTimeout = 30 * time.Second

// Start starts the server and, unless cfg.UIPort is -1, the Web UI, and
// returns once the frontend answers and the namespace has the search
// attributes. A port already in use is an UNAVAILABLE error, a data
// directory that another running server holds is INVALID_STATE; both are
// found before anything binds (CheckPorts), and neither is tried again. A
// port Start picked itself (the internal services', and the frontend's
// and UI's when 0) is free when picked but bound a moment later: when
// another process takes it in between, Start tries again with fresh ports,
// up to startAttempts times.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	const op = "temporal.start"
	began := time.Now()
	cfg = withDefaults(cfg)
	for attempt := 1; ; attempt++ {
		p, err := resolvePorts(cfg)
		if err != nil {
			return nil, withOp(err, op)
		}
		s, err := startOnce(ctx, cfg, p)
		if err == nil {
			cfg.Logger.Info("temporal server started", "frontend", s.frontend, "tls", s.tls != nil, "ui", s.uiURL,
				"namespace", cfg.Namespace, "dataDir", cfg.DataDir, "took", time.Since(began).Round(time.Millisecond))
			return s, nil
		}
		if attempt == startAttempts || !strings.Contains(err.Error(), "address already in use") {
			return nil, withOp(err, op)
		}
		cfg.Logger.Warn("a port picked for the Temporal server was taken before it bound; trying other ports", "err", err)
	}
}

// startAttempts bounds Start's tries when a port it picked is taken.
const startAttempts = 3

// startOnce starts the server on p; on error what started is stopped.
func startOnce(ctx context.Context, cfg Config, p ports) (*Server, error) {
	if p.ui != 0 && cfg.UIGate == nil {
		return nil, errs.New(errs.InvalidInput, "the Web UI needs a gate (Config.UIGate): it shows every tenant's workflows")
	}
	s := &Server{
		frontend: net.JoinHostPort(connectHost(cfg.Host), strconv.Itoa(p.frontend)),
		log:      cfg.Logger,
		logLevel: new(slog.LevelVar),
	}
	s.logLevel.Set(cfg.LogLevel.Level())
	var err error
	if cfg.TLS != nil {
		if s.tls, err = loadTLS(*cfg.TLS, connectHost(cfg.Host)); err != nil {
			return nil, err
		}
	}
	if err := s.start(ctx, cfg, p); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// start locks the data directory, prepares the database, starts the server
// and waits for it, then starts the UI. On error the caller stops s.
func (s *Server) start(ctx context.Context, cfg Config, p ports) error {
	if cfg.DataDir != "" {
		lock, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		s.lock = lock
	}
	sc, err := sqlConfig(cfg)
	if err != nil {
		return err
	}
	if err := createNamespace(sc, cfg.Namespace); err != nil {
		return err
	}
	if err := s.startTemporal(cfg, sc, p); err != nil {
		return err
	}
	if err := s.ready(ctx, cfg.Namespace); err != nil {
		return err
	}
	if p.ui != 0 {
		return s.startUI(cfg, p.ui)
	}
	return nil
}

func withDefaults(cfg Config) Config {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Host == "" || cfg.Host == "localhost" {
		cfg.Host = "127.0.0.1" // the server wants an IP
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LogLevel == nil {
		cfg.LogLevel = slog.LevelWarn
	}
	return cfg
}

// CheckPorts fails, naming the port, when the frontend or Web UI port
// cfg asks for (not 0: picked) is out of range or cannot be bound now. A
// caller that starts other things first (serve: PostgreSQL) checks before
// them; Start checks again before it binds.
func CheckPorts(cfg Config) error {
	cfg = withDefaults(cfg)
	if cfg.FrontendPort < 0 || cfg.FrontendPort > 65535 {
		return errs.Invalid("temporal.frontendPort", "port %d is out of range", cfg.FrontendPort)
	}
	if cfg.UIPort < -1 || cfg.UIPort > 65535 {
		return errs.Invalid("temporal.uiPort", "port %d is out of range (-1 turns the UI off)", cfg.UIPort)
	}
	if cfg.FrontendPort > 0 {
		if err := checkPortFree(cfg.Host, cfg.FrontendPort, "Temporal frontend"); err != nil {
			return err
		}
	}
	if cfg.UIPort > 0 {
		return checkPortFree(cfg.Host, cfg.UIPort, "Temporal Web UI")
	}
	return nil
}

// resolvePorts checks the ports asked for (CheckPorts) and picks the others.
func resolvePorts(cfg Config) (ports, error) {
	var p ports
	if err := CheckPorts(cfg); err != nil {
		return p, err
	}
	var err error
	if p.frontend = cfg.FrontendPort; p.frontend == 0 {
		if p.frontend, err = freePort(cfg.Host); err != nil {
			return p, err
		}
	}
	for _, q := range []*int{&p.history, &p.matching, &p.worker} {
		if *q, err = pickPort(loopback); err != nil {
			return p, err
		}
	}
	switch {
	case cfg.UIPort > 0:
		p.ui = cfg.UIPort
	case cfg.UIPort == 0:
		p.ui = p.frontend + 1000
		if p.ui > 65535 || checkPortFree(cfg.Host, p.ui, "Temporal Web UI") != nil {
			p.ui, err = freePort(cfg.Host)
		}
	}
	return p, err
}

// startTemporal builds and starts the server. The server's Fatal logs panic
// (see slogLogger): a panic during start is returned as an error, once the
// listeners the abandoned build bound are released (releaseLeaked), so that
// another attempt can bind a fixed frontend port again.
func (s *Server) startTemporal(cfg Config, sc *config.SQL, p ports) (err error) {
	own := []int{p.frontend, p.history, p.matching, p.worker}
	before, snapErr := listening(own) // what is not the build's to release
	defer func() {
		if r := recover(); r != nil {
			err = errs.New(errs.Internal, "the Temporal server failed to start: %v", r)
			if snapErr == nil {
				s.releaseBuilt(own, before, fmt.Sprint(r))
			}
		}
	}()
	conf := serverConfig(cfg, sc, p)
	local := func(host string, port int) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(port)))
	}
	opts := []temporal.ServerOption{
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: local(connectHost(cfg.Host), p.frontend),
			primitives.HistoryService:  local(loopback, p.history),
			primitives.MatchingService: local(loopback, p.matching),
			primitives.WorkerService:   local(loopback, p.worker),
		}),
		temporal.WithLogger(slogLogger{log: cfg.Logger, min: s.logLevel}),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	}
	if cfg.Metrics != nil {
		mo, err := metricsOption(cfg.Metrics)
		if err != nil {
			return err
		}
		opts = append(opts, mo)
	}
	if s.tls != nil {
		opts = append(opts,
			temporal.WithTLSConfigFactory(tlsProvider{s.tls}),
			temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper {
				return claimMapper{trustDomain: s.tls.trustDomain}
			}),
			temporal.WithAuthorizer(newAuthorizer(cfg.Namespace, cfg.Logger)))
	}
	srv, err := temporal.NewServer(opts...)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot build the Temporal server")
	}
	if err := srv.Start(); err != nil {
		srv.Stop()
		return errs.Wrap(errs.Internal, err, "the Temporal server failed to start")
	}
	s.temporal = srv
	return nil
}

// releaseBuilt releases what a build that panicked with msg bound on ports
// (releaseLeaked) and was not listening there before it. Only a build that
// failed to bind one of ports does that, and what listens on that one is
// another's; any other panic releases nothing.
func (s *Server) releaseBuilt(ports []int, before map[string]bool, msg string) {
	failed := bindFailure(msg)
	if failed == 0 {
		return
	}
	built := slices.DeleteFunc(slices.Clone(ports), func(p int) bool { return p == failed })
	if _, err := releaseLeaked(built, before); err != nil {
		s.log.Warn("cannot release the listeners a failed Temporal start left open", "ports", built, "err", err)
	}
}

// bindFailure is the port of "listen tcp host:port: bind: address already
// in use" in msg, or 0.
func bindFailure(msg string) int {
	m := bindFailed.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	port, _ := strconv.Atoi(m[1])
	return port
}

var bindFailed = regexp.MustCompile(`listen tcp \S*:(\d+): bind: address already in use`)

// ready waits for the frontend to answer and makes sure the namespace has
// the search attributes (a database made before an attribute was added
// lacks it: CreateNamespaces does nothing to an existing namespace).
func (s *Server) ready(ctx context.Context, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	opts := client.Options{
		HostPort:  s.frontend,
		Namespace: namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	}
	opts.ConnectionOptions.TLS = s.ClientTLS()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "the Temporal frontend at %s does not answer", s.frontend)
	}
	defer c.Close()
	return searchattrs.Register(ctx, c, namespace)
}

// FrontendAddress is the host:port of the frontend, for clients and workers.
func (s *Server) FrontendAddress() string { return s.frontend }

// UIURL is the Web UI's base URL, or "" when the UI is off.
func (s *Server) UIURL() string { return s.uiURL }

// Stop stops the UI and the server. It is safe to call more than once; later
// calls return the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		// Shutting down, the server's services complain about each other
		// going away; a real failure to stop is returned.
		s.logLevel.Set(slog.LevelError + 4)
		if s.ui != nil {
			_ = s.ui.Close()
		}
		if s.temporal != nil {
			if err := s.temporal.Stop(); err != nil {
				s.stopErr = errs.Wrap(errs.Internal, err, "the Temporal server did not stop cleanly")
			}
		}
		if s.lock != nil {
			s.lock.Close() // closing the file releases the lock
		}
	})
	return s.stopErr
}

func withOp(err error, op string) error {
	if e, ok := err.(*errs.Error); ok {
		return e.WithOp(op)
	}
	return fmt.Errorf("%s: %w", op, err)
}
