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
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/buildinfo"
	"github.com/better-compute/better-compute/pki"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bccli.Run(ctx, app(os.Stdout, os.Stderr), os.Args, os.Stderr)
	stop()
	os.Exit(code)
}

// app is the CLI with the commands that are not API calls, --version and
// shell completion.
func app(stdout, stderr io.Writer) *cli.App {
	a := bccli.App(stdout, stderr, serveCommand(), pkiCommand(), demoCommand(), completionCommand())
	a.Version, a.HideVersion = buildinfo.Read().String(), false
	a.EnableBashCompletion = true
	return a
}

// logger writes to the app's error stream at --log-level, as text or, with
// --log-format json, one JSON object a line.
func logger(c *cli.Context) *slog.Logger {
	opts := &slog.HandlerOptions{Level: parseLevel(c.String("log-level"), slog.LevelInfo)}
	if c.String("log-format") == "json" {
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts))
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts))
}

// logFormatFlag is --log-format, refused at start unless json or text.
func logFormatFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json (one object a line)",
		Action: func(_ *cli.Context, v string) error {
			if v != "text" && v != "json" {
				return errs.Invalid("log-format", "--log-format %q: want text or json", v)
			}
			return nil
		}}
}

// parseLevel reads debug, info, warn or error; anything else is def.
func parseLevel(level string, def slog.Level) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return def
	}
	return l
}

func dataDirFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "data-dir", EnvVars: []string{"BETTER_COMPUTE_DATA_DIR"},
		Value: controlplane.DefaultDataDir, Usage: "where the control plane keeps its state"}
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the control plane (embedded Temporal and PostgreSQL unless told otherwise)",
		Flags: []cli.Flag{
			dataDirFlag(),
			&cli.StringFlag{Name: "database-url", EnvVars: []string{"BETTER_COMPUTE_DATABASE_URL"}, Usage: "external PostgreSQL (default: a private cluster in the data dir)"},
			&cli.StringFlag{Name: "temporal-address", Usage: "external Temporal frontend host:port (default: an embedded server)"},
			&cli.StringFlag{Name: "temporal-namespace", Value: controlplane.DefaultNamespace},
			&cli.StringFlag{Name: "temporal-listen", Value: controlplane.DefaultTemporalListen, Usage: "the embedded Temporal frontend's address"},
			&cli.BoolFlag{Name: "temporal-tls", Usage: "dial --temporal-address with mTLS, as a control plane of the CA in --pki-dir (e.g. another serve's embedded frontend)"},
			&cli.StringFlag{Name: "temporal-server-name", Usage: "the name to verify on --temporal-address's certificate (default: its host)"},
			&cli.StringFlag{Name: "listen", Value: controlplane.DefaultListen, Usage: "the API's address"},
			&cli.StringFlag{Name: "ui-listen", Value: controlplane.DefaultUIListen, Usage: "the embedded Temporal Web UI's address, or off"},
			&cli.StringFlag{Name: "agents-listen", Value: controlplane.DefaultAgentsListen, Usage: "TLS listener where agents join, or off"},
			&cli.StringFlag{Name: "metrics-listen", Value: controlplane.DefaultMetricsListen, Usage: "plain HTTP listener for Prometheus (/metrics), or off"},
			&cli.StringFlag{Name: "config", Usage: "configuration file (default: <data-dir>/config.yaml)"},
			&cli.StringFlag{Name: "pki-dir", Usage: "the CA (default: <data-dir>/pki)"},
			&cli.StringFlag{Name: "only", Usage: "run only the api or only the worker, for scale-out"},
			&cli.StringFlag{Name: "log-level", Value: "info"},
			logFormatFlag(),
			&cli.StringFlag{Name: "temporal-log-level", Value: "warn", Usage: "the embedded Temporal server's own logs from this level (within --log-level)"},
		},
		Action: func(c *cli.Context) error {
			return controlplane.Run(c.Context, controlplane.Config{
				DataDir: c.String("data-dir"), DatabaseURL: c.String("database-url"),
				TemporalAddress: c.String("temporal-address"), TemporalNamespace: c.String("temporal-namespace"),
				TemporalListen: c.String("temporal-listen"), Listen: c.String("listen"), UIListen: c.String("ui-listen"),
				TemporalTLS: c.Bool("temporal-tls"), TemporalServerName: c.String("temporal-server-name"),
				AgentsListen: c.String("agents-listen"), MetricsListen: c.String("metrics-listen"), ConfigFile: c.String("config"), PKIDir: c.String("pki-dir"),
				Only: c.String("only"), Logger: logger(c),
				TemporalLogLevel: parseLevel(c.String("temporal-log-level"), slog.LevelWarn),
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
