// Command better-compute is the operator's CLI and the control plane
// (`better-compute serve`).
package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	bccli "github.com/better-compute/better-compute/cli"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/internal/buildinfo"
	"github.com/better-compute/better-compute/internal/logflag"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/pki"
)

func main() {
	tuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bccli.Run(ctx, app(os.Stdout, os.Stderr), os.Args, os.Stderr)
	stop()
	os.Exit(code)
}

// app is the CLI with the commands that are not API calls, --version and
// shell completion.
func app(stdout, stderr io.Writer) *cli.App {
	a := bccli.App(stdout, stderr, serveCommand(), temporalCommand(), pkiCommand(), keysCommand(), demoCommand(), demoRackCommand(), completionCommand())
	a.Version, a.HideVersion = buildinfo.Read().String(), false
	a.EnableBashCompletion = true
	return a
}

func dataDirFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "data-dir", EnvVars: []string{"BETTER_COMPUTE_DATA_DIR"},
		Value: controlplane.DefaultDataDir, Usage: "where the control plane keeps its state"}
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the control plane (embedded Temporal and PostgreSQL unless told otherwise)",
		Flags: append([]cli.Flag{
			dataDirFlag(),
			&cli.StringFlag{Name: "database-url", EnvVars: []string{"BETTER_COMPUTE_DATABASE_URL"}, Usage: "external PostgreSQL (default: a private cluster in the data dir)"},
			&cli.StringFlag{Name: "temporal-address", Usage: "external Temporal frontend host:port (default: an embedded server)"},
			&cli.StringFlag{Name: "temporal-namespace", Value: controlplane.DefaultNamespace},
			&cli.StringFlag{Name: "temporal-listen", Value: controlplane.DefaultTemporalListen, Usage: "the embedded Temporal frontend's address"},
			&cli.BoolFlag{Name: "temporal-tls", Usage: "dial --temporal-address with mTLS, as a control plane of the CA in --pki-dir (e.g. another serve's embedded frontend)"},
			&cli.StringFlag{Name: "temporal-server-name", Usage: "the name to verify on --temporal-address's certificate (default: its host)"},
			&cli.StringFlag{Name: "listen", Value: controlplane.DefaultListen, Usage: "the API's address"},
			&cli.StringFlag{Name: "ui-listen", Value: controlplane.DefaultUIListen, Usage: "the embedded Temporal Web UI's address, or off"},
			&cli.StringSliceFlag{Name: "ui-host", Usage: "a name the Web UI answers to, beside its listen host and localhost (repeatable); any other Host is refused"},
			&cli.BoolFlag{Name: "ui-write-actions", Usage: "let the root tenant terminate, reset, signal… in the Web UI (default: read-only)"},
			&cli.StringFlag{Name: "agents-listen", Value: controlplane.DefaultAgentsListen, Usage: "TLS listener where agents join, or off"},
			&cli.StringFlag{Name: "metrics-listen", Value: controlplane.DefaultMetricsListen, Usage: "plain HTTP listener for Prometheus (/metrics), or off"},
			&cli.StringFlag{Name: "config", Usage: "configuration file (default: <data-dir>/config.yaml)"},
			&cli.StringFlag{Name: "pki-dir", Usage: "the CA (default: <data-dir>/pki)"},
			&cli.StringFlag{Name: "only", Usage: "run only the api or only the worker, for scale-out"},
			&cli.StringFlag{Name: "log-level", Value: "info"},
			logflag.Format(),
			&cli.StringFlag{Name: "temporal-log-level", Value: "warn", Usage: "the embedded Temporal server's own logs from this level (within --log-level)"},
		}, tlsFlags()...),
		Action: func(c *cli.Context) error {
			log := logflag.Logger(c)
			tp, stop, err := tracing.Start(c.Context, tracing.FromEnv(os.Getenv, "better-compute"))
			if err != nil {
				return err
			}
			defer tracing.Stop(stop, log)
			return controlplane.Run(c.Context, controlplane.Config{
				DataDir: c.String("data-dir"), DatabaseURL: c.String("database-url"),
				TemporalAddress: c.String("temporal-address"), TemporalNamespace: c.String("temporal-namespace"),
				TemporalListen: c.String("temporal-listen"), Listen: c.String("listen"), UIListen: c.String("ui-listen"),
				TemporalTLS: c.Bool("temporal-tls"), TemporalServerName: c.String("temporal-server-name"),
				AgentsListen: c.String("agents-listen"), MetricsListen: c.String("metrics-listen"), ConfigFile: c.String("config"), PKIDir: c.String("pki-dir"),
				KeyFile: c.String("key-file"), KeyTransit: c.String("key-transit"), TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
				Only: c.String("only"), Logger: log, Tracer: tp,
				UIHosts: c.StringSlice("ui-host"), UIWriteActions: c.Bool("ui-write-actions"),
				TemporalLogLevel: logflag.ParseLevel(c.String("temporal-log-level"), slog.LevelWarn),
			}, c.App.Writer)
		},
	}
}

func pkiCommand() *cli.Command {
	return &cli.Command{
		Name:  "pki",
		Usage: "the project's certificate authority",
		Subcommands: []*cli.Command{{
			Name:  "init",
			Usage: "create the CA in the data dir",
			Flags: []cli.Flag{
				dataDirFlag(),
				&cli.StringFlag{Name: "trust-domain", Required: true, Usage: "e.g. site.example.test"},
				&cli.StringFlag{Name: "pki-dir", Usage: "default: <data-dir>/pki"},
			},
			Action: func(c *cli.Context) error {
				dir := c.String("pki-dir")
				if dir == "" {
					dir = c.String("data-dir") + "/pki"
				}
				ca, err := pki.Init(dir, c.String("trust-domain"))
				if err != nil {
					return err
				}
				_, err = c.App.Writer.Write([]byte("created CA for trust domain " + ca.TrustDomain() + " in " + dir + "\n"))
				return err
			},
		}},
	}
}
