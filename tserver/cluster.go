package tserver

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/temporal"

	"github.com/better-compute/better-compute/errs"
)

// The cluster metadata every process of a cluster agrees on (as serverConfig's).
const (
	failoverVersionIncrement = 10
	initialFailoverVersion   = 1
)

// maxMembershipPort is the largest membership port Temporal's PostgreSQL
// schema stores (cluster_membership.rpc_port is a smallint).
const maxMembershipPort = 32767

// Services are the Temporal services a cluster process may run.
var Services = []string{"frontend", "history", "matching", "worker"}

// ServiceAddr is where one service of a cluster process listens.
type ServiceAddr struct {
	Listen         string // host:port of its gRPC
	MembershipPort int    // its ringpop port, on the same host
}

// ClusterConfig is one process of a multi-process Temporal cluster on
// PostgreSQL: some of the services, each on its own ports, finding the
// others through ringpop membership over the database.
type ClusterConfig struct {
	Store ClusterStore
	// Services to run; nil means all of Services.
	Services []string
	// Addrs gives each service's listener; a service run here must have one.
	Addrs map[string]ServiceAddr
	// BroadcastAddress is the IP other processes reach this one at; ""
	// means the listen host (which must then not be a wildcard).
	BroadcastAddress string
	LogLevel         slog.Leveler // nil: warn
}

// Cluster is a running cluster process.
type Cluster struct {
	temporal temporal.Server
	logLevel *slog.LevelVar
}

// StartCluster sets up the schema if it is missing (SetupSchema) and starts
// the services of cfg. It returns once they have started; a frontend
// answers when the history service of some process has joined too.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	const op = "temporal.cluster.start"
	if len(cfg.Services) == 0 {
		cfg.Services = Services
	}
	if cfg.LogLevel == nil {
		cfg.LogLevel = slog.LevelWarn
	}
	cfg.Store.Logger = orDiscard(cfg.Store.Logger)
	if err := checkClusterConfig(cfg); err != nil {
		return nil, withOp(err, op)
	}
	if err := SetupSchema(ctx, cfg.Store); err != nil {
		return nil, withOp(err, op)
	}
	st, err := sqlStores(cfg.Store)
	if err != nil {
		return nil, withOp(err, op)
	}
	c := &Cluster{logLevel: levelVar(cfg.LogLevel.Level())}
	if err := c.start(cfg, st); err != nil {
		return nil, withOp(err, op)
	}
	cfg.Store.Logger.Info("temporal cluster process started", "services", strings.Join(cfg.Services, ","),
		"shards", cfg.Store.HistoryShards, "broadcast", cfg.BroadcastAddress)
	return c, nil
}

// checkClusterConfig refuses unknown services, missing or taken listeners,
// and a broadcast address that others could not dial.
func checkClusterConfig(cfg ClusterConfig) error {
	for _, s := range cfg.Services {
		if !slices.Contains(Services, s) {
			return errs.Invalid("services", "unknown service %q (want some of %s)", s, strings.Join(Services, ","))
		}
		a, ok := cfg.Addrs[s]
		if !ok {
			return errs.Invalid(s+"-listen", "the %s service needs a listen address", s)
		}
		host, port, err := net.SplitHostPort(a.Listen)
		if err != nil || net.ParseIP(host) == nil {
			return errs.Invalid(s+"-listen", "want ip:port, got %q", a.Listen)
		}
		if err := checkPortFree(host, atoi(port), "Temporal "+s); err != nil {
			return err
		}
		if a.MembershipPort < 1 || a.MembershipPort > maxMembershipPort {
			return errs.Invalid(s+"-membership-port", "want 1 to %d (Temporal's PostgreSQL schema keeps it in a smallint), got %d", maxMembershipPort, a.MembershipPort)
		}
		if err := checkPortFree(host, a.MembershipPort, "Temporal "+s+" membership"); err != nil {
			return err
		}
		if cfg.BroadcastAddress == "" && net.ParseIP(host).IsUnspecified() {
			return errs.Invalid("broadcast-address", "the %s service listens on %s: give the IP other processes reach it at", s, host)
		}
	}
	if b := cfg.BroadcastAddress; b != "" && net.ParseIP(b) == nil {
		return errs.Invalid("broadcast-address", "want an IP, got %q", b)
	}
	return nil
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// start builds and starts the server; Fatal logs panic (see slogLogger) and
// come back as an error.
func (c *Cluster) start(cfg ClusterConfig, st stores) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errs.New(errs.Internal, "the Temporal services failed to start: %v", r)
		}
	}()
	srv, err := temporal.NewServer(
		temporal.WithConfig(clusterServerConfig(cfg, st)),
		temporal.ForServices(cfg.Services),
		temporal.WithLogger(slogLogger{log: cfg.Store.Logger, min: c.logLevel}),
		temporal.WithDynamicConfigClient(dynamicConfig()),
	)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot build the Temporal services")
	}
	if err := srv.Start(); err != nil {
		srv.Stop()
		return errs.Wrap(errs.Unavailable, err, "the Temporal services failed to start")
	}
	c.temporal = srv
	return nil
}

// clusterServerConfig is serverConfig's cluster on PostgreSQL with ringpop
// membership: no static hosts, no public client address (internal services
// find the frontends through membership).
func clusterServerConfig(cfg ClusterConfig, st stores) *config.Config {
	var c config.Config
	c.Global.Membership.MaxJoinDuration = 30 * time.Second
	c.Global.Membership.BroadcastAddress = cfg.BroadcastAddress
	c.Persistence = config.Persistence{
		DefaultStore:     "postgres-default",
		VisibilityStore:  "postgres-visibility",
		NumHistoryShards: cfg.Store.HistoryShards,
		DataStores: map[string]config.DataStore{
			"postgres-default":    {SQL: st.main},
			"postgres-visibility": {SQL: st.visibility},
		},
	}
	c.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: failoverVersionIncrement,
		MasterClusterName:        ClusterName,
		CurrentClusterName:       ClusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			ClusterName: {Enabled: true, InitialFailoverVersion: initialFailoverVersion,
				RPCAddress: cfg.Store.FrontendAddress, ClusterID: ClusterID},
		},
	}
	c.DCRedirectionPolicy.Policy = "noop"
	c.Services = map[string]config.Service{}
	// Every service has an entry (the server reads all four ports); those
	// not run here are never bound.
	for _, s := range Services {
		var svc config.Service
		if a, ok := cfg.Addrs[s]; ok {
			host, port, _ := net.SplitHostPort(a.Listen)
			svc.RPC.BindOnIP, svc.RPC.GRPCPort, svc.RPC.MembershipPort = host, atoi(port), a.MembershipPort
		}
		c.Services[s] = svc
	}
	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	return &c
}

// Stop stops the services: they leave the membership ring, so the others
// take over their shards and queues at once.
func (c *Cluster) Stop() error {
	c.logLevel.Set(slog.LevelError + 4)
	if err := c.temporal.Stop(); err != nil {
		return errs.Wrap(errs.Internal, err, "the Temporal services did not stop cleanly")
	}
	return nil
}
