// Command acme-worker is the plugin author's own control-plane worker:
// better-compute's worker with the autoinstall plugin added. It runs next
// to `better-compute serve --only api` (in place of serve's own worker),
// on the same PostgreSQL, Temporal and key file. `acme-worker profile`
// prints the plugin's profile for `better-compute profiles create`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/sdk"

	"example.com/acme-autoinstall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "acme-worker:", err)
		os.Exit(1)
	}
}

// run parses the flags (serve's, for what a worker needs) and runs the
// worker until ctx ends.
func run(ctx context.Context, args []string, out, logs io.Writer) error {
	if len(args) == 1 && args[0] == "profile" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(autoinstall.Profile())
	}
	fs := flag.NewFlagSet("acme-worker", flag.ContinueOnError)
	fs.SetOutput(logs)
	cfg := controlplane.Config{Only: controlplane.OnlyWorker, Plugins: []sdk.Plugin{autoinstall.Plugin()}}
	fs.StringVar(&cfg.DataDir, "data-dir", "acme-worker-data", "this worker's own state")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "the control plane's PostgreSQL (required)")
	fs.StringVar(&cfg.TemporalAddress, "temporal-address", "", "the control plane's Temporal frontend host:port (required)")
	fs.StringVar(&cfg.TemporalNamespace, "temporal-namespace", controlplane.DefaultNamespace, "")
	fs.BoolVar(&cfg.TemporalTLS, "temporal-tls", false, "dial --temporal-address with mTLS, as a control plane of the CA in --pki-dir")
	fs.StringVar(&cfg.TemporalServerName, "temporal-server-name", "", "the name to verify on --temporal-address's certificate")
	fs.StringVar(&cfg.PKIDir, "pki-dir", "", "the control plane's CA (default: <data-dir>/pki)")
	fs.StringVar(&cfg.KeyFile, "key-file", "", "the control plane's master key file (default: <data-dir>/master.key)")
	fs.StringVar(&cfg.ConfigFile, "config", "", "the control plane's configuration file (default: <data-dir>/config.yaml)")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "off", "plain HTTP listener for Prometheus (/metrics), or off")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: lv}))
	if cfg.DatabaseURL == "" || cfg.TemporalAddress == "" {
		return fmt.Errorf("--database-url and --temporal-address name the control plane this worker serves")
	}
	return controlplane.Run(ctx, cfg, out)
}
