package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/logflag"
	"github.com/better-compute/better-compute/tserver"
)

// defaultServicePorts are Temporal's own defaults: gRPC and membership.
var defaultServicePorts = map[string][2]int{
	"frontend": {7233, 6933}, "history": {7234, 6934}, "matching": {7235, 6935}, "worker": {7239, 6939},
}

// temporalStoreFlags are the flags of the cluster's database, for both the
// services and setup-schema.
func temporalStoreFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "database-url", EnvVars: []string{"BETTER_COMPUTE_TEMPORAL_DATABASE_URL"},
			Usage: "PostgreSQL for persistence, postgres://user:password@host:port/temporal (visibility goes in <database>" + tserver.VisibilitySuffix + ")"},
		&cli.IntFlag{Name: "history-shards", Value: 4, Usage: "history shards: fixed by the first set-up, every process must give the same"},
		&cli.StringFlag{Name: "namespace", Value: controlplane.DefaultNamespace, Usage: "created at set-up with the search attributes"},
		&cli.StringFlag{Name: "frontend-address", Value: controlplane.DefaultTemporalListen,
			Usage: "the frontends' address as the cluster records it (the same in every process, e.g. a load balancer's)"},
		&cli.IntFlag{Name: "database-max-conns", Value: 20, Usage: "connections of this process to the database (half as many to visibility)"},
		&cli.StringFlag{Name: "log-level", Value: "info"},
		logflag.Format(),
	}
}

func clusterStore(c *cli.Context) tserver.ClusterStore {
	return tserver.ClusterStore{DatabaseURL: c.String("database-url"), HistoryShards: int32(c.Int("history-shards")),
		Namespace: c.String("namespace"), FrontendAddress: c.String("frontend-address"), MaxConns: c.Int("database-max-conns"), Logger: logflag.Logger(c)}
}

func temporalCommand() *cli.Command {
	flags := append(temporalStoreFlags(),
		&cli.StringFlag{Name: "services", Value: strings.Join(tserver.Services, ","), Usage: "the services this process runs"},
		&cli.StringFlag{Name: "broadcast-address", Usage: "the IP other processes reach this one at (default: the listen host)"},
		&cli.StringFlag{Name: "temporal-log-level", Value: "warn", Usage: "the Temporal services' own logs from this level (within --log-level)"})
	for _, s := range tserver.Services {
		p := defaultServicePorts[s]
		flags = append(flags,
			&cli.StringFlag{Name: s + "-listen", Value: fmt.Sprintf("127.0.0.1:%d", p[0]), Usage: "the " + s + " service's gRPC address"},
			&cli.IntFlag{Name: s + "-membership-port", Value: p[1], Usage: "the " + s + " service's membership (ringpop) port, on its listen host"})
	}
	return &cli.Command{
		Name:  "temporal",
		Usage: "run Temporal services (the embedded server's code) on PostgreSQL, one process of a cluster; serve --temporal-address points at the frontends",
		Flags: flags,
		Subcommands: []*cli.Command{{
			Name:  "setup-schema",
			Usage: "create or upgrade the cluster's databases with Temporal's schema tool and fix the number of history shards (idempotent)",
			Flags: temporalStoreFlags(),
			Action: func(c *cli.Context) error {
				if err := tserver.SetupSchema(c.Context, clusterStore(c)); err != nil {
					return err
				}
				_, err := fmt.Fprintf(c.App.Writer, "the Temporal schema is set up (%d history shards, namespace %s)\n", c.Int("history-shards"), c.String("namespace"))
				return err
			},
		}},
		Action: runTemporal,
	}
}

// runTemporal runs the services until the signal.
func runTemporal(c *cli.Context) error {
	cfg := tserver.ClusterConfig{Store: clusterStore(c), BroadcastAddress: c.String("broadcast-address"),
		Addrs: map[string]tserver.ServiceAddr{}, LogLevel: logflag.ParseLevel(c.String("temporal-log-level"), slog.LevelWarn)}
	for _, s := range strings.Split(c.String("services"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		cfg.Services = append(cfg.Services, s)
		cfg.Addrs[s] = tserver.ServiceAddr{Listen: c.String(s + "-listen"), MembershipPort: c.Int(s + "-membership-port")}
	}
	if len(cfg.Services) == 0 {
		return errs.Invalid("services", "name at least one of %s", strings.Join(tserver.Services, ","))
	}
	srv, err := tserver.StartCluster(c.Context, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "temporal %s running\n", strings.Join(cfg.Services, ","))
	<-c.Context.Done()
	return srv.Stop()
}
