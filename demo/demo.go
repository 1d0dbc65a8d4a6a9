// Package demo assembles `better-compute demo`: a control plane on the
// embedded default, a site agent and an emulated rack in one process; it
// registers a site, pool, image and deploy profile through the API, and takes
// every machine through enroll → ready → deploy → deployed → undeploy →
// ready, printing each machine's progress as it goes.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/better-compute/bench/procmem"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/emulate/ipmibmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/siteagent"
	"github.com/better-compute/better-compute/tserver"
)

// Config is what `better-compute demo` takes.
type Config struct {
	Machines int
	Once     bool   // exit after the loop (non-zero if a machine failed)
	DataDir  string // wiped at start: an emulated rack's BMCs change every run
	Out      io.Writer
	Logger   *slog.Logger // the control plane's, and every other process's unless set below

	// IPMI is how many of the machines (the last) have an IPMI BMC,
	// ipmi_sim, in a pool of their own; the others have Redfish BMCs.
	IPMI int

	// Each process's own logger (nil: Logger).
	TemporalLogger, SiteLogger, RackLogger, BMCLogger, RamdiskLogger *slog.Logger
	// TemporalLogLevel is the least level the embedded Temporal server logs (nil: warn).
	TemporalLogLevel slog.Leveler

	BMCPassword string                 // the emulated BMCs' (default rackPassword)
	APIOptions  []connect.ClientOption // more options of the API client: tests record its answers

	// Listeners; the defaults are the control plane's. Tests use 127.0.0.1:0.
	Listen, TemporalListen, UIListen, AgentsListen string
	ImageSize                                      int64 // bytes of the demo OS image (default 64 MiB)
	// BootStall is the site agent's bound on a ramdisk boot that shows no
	// progress (siteagent.Config.BootStall).
	BootStall time.Duration
	// Stall is how long a phase of a machine's loop may show no progress
	// before it fails (0: DefaultStall); the phase itself has no bound.
	Stall time.Duration
	// Tracer traces every process of the demo — API calls, workflows, the
	// site's activities and the ramdisks' commands — as one trace per call
	// (tracing.Start); nil for none.
	Tracer trace.TracerProvider
	// ControlPlaneOnly is the control plane's Only: controlplane.OnlyAPI
	// leaves the workflows to a worker started beside the demo (a plugin
	// author's, as TestAutoinstallPlugin does).
	ControlPlaneOnly string
	// Plugins are the control plane's (controlplane.Config.Plugins): its
	// worker runs their control-plane steps.
	Plugins []sdk.Plugin
	// RackCommand, when set, runs the emulated rack in a process of its own:
	// the command and its first arguments, to which the demo adds bcd
	// emulate's flags (--machines, --ipmi, --dir, --boot-url, --bmc-username,
	// --bmc-password-file); it prints the machines as bcd emulate does. Rack
	// is then nil (Machines lists them) and the machines' installed OS runs
	// no node agent.
	RackCommand []string
}

// DefaultDataDir is where the demo keeps its state.
const DefaultDataDir = ".better-compute-demo"

// Demo is a running demo: everything an operator would run, in one process.
type Demo struct {
	cfg   Config
	CP    *controlplane.ControlPlane
	Agent *siteagent.Agent
	Rack  *emulate.Rack
	API   *Client
	Image *ImageServer
	// What Setup registered.
	SiteID, PoolID, ImageID, Profile string
	IPMIPoolID                       string // the IPMI machines' pool (a hardware profile fixes the power driver)
	started                          time.Time
	mu                               sync.Mutex
	last                             map[string]string // node → last state printed
	cpTook                           time.Duration     // the control plane's start
	rackProc                         *rackProcess      // the rack's own process (Config.RackCommand)
	pgSampler                        *procmem.Sampler  // PostgreSQL's process tree
}

// Start starts the control plane, the site agent and the rack, and
// registers the site, pool, image and profile. Stop stops it all.
func Start(ctx context.Context, cfg Config) (d *Demo, err error) {
	cfg = withDefaults(cfg)
	if cfg.IPMI > 0 { // before anything starts: say what to install
		if err := ipmibmc.NeedSim(); err != nil {
			return nil, err
		}
	}
	started := &Demo{cfg: cfg, started: time.Now()}
	d = started
	defer func() {
		if err != nil {
			started.Stop() // d is nil by now
		}
	}()
	if err := prepareDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	d.say("starting the control plane in %s", cfg.DataDir)
	cpStart := time.Now()
	d.CP, err = controlplane.Start(ctx, controlplane.Config{DataDir: cfg.DataDir, Listen: cfg.Listen,
		TemporalListen: cfg.TemporalListen, UIListen: cfg.UIListen, AgentsListen: cfg.AgentsListen, Logger: cfg.Logger,
		TemporalLogger: cfg.TemporalLogger, TemporalLogLevel: cfg.TemporalLogLevel, Tracer: cfg.Tracer, Only: cfg.ControlPlaneOnly,
		Plugins: cfg.Plugins})
	if err != nil {
		return nil, err
	}
	d.cpTook = time.Since(cpStart)
	d.samplePostgres()
	if d.API, err = NewClient(d.CP.APIURL(), d.CP.RootTokenPath(), cfg.APIOptions...); err != nil {
		return nil, err
	}
	if err := d.register(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Machines <= 0 {
		cfg.Machines = 3
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, l := range []**slog.Logger{&cfg.SiteLogger, &cfg.RackLogger, &cfg.BMCLogger, &cfg.RamdiskLogger} {
		if *l == nil {
			*l = cfg.Logger
		}
	}
	if cfg.BMCPassword == "" {
		cfg.BMCPassword = rackPassword
	}
	if cfg.ImageSize <= 0 {
		cfg.ImageSize = 64 << 20
	}
	return cfg
}

// prepareDataDir starts from an empty data dir with a CA and the hardware
// profile the emulated rack needs. It wipes only a demo's data dir (its
// config.yaml says so) that no running demo or serve holds, or an empty
// one: --data-dir naming anything else is refused with nothing removed.
func prepareDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return errs.Wrap(errs.InvalidInput, err, "--data-dir %s cannot be read", dir)
	}
	if len(entries) > 0 {
		if cfg, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); !bytes.HasPrefix(cfg, []byte(demoConfigHeader)) {
			return errs.Invalid("data-dir", "%s is not a demo's data dir (its config.yaml was not written by the demo), "+
				"and the demo wipes its data dir at start: name a new or empty directory", dir)
		}
		if err := tserver.CheckDataDirFree(dir); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear the demo's data dir %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := pki.Init(filepath.Join(dir, "pki"), "demo.better-compute.test"); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(hardwareConfig), 0o600)
}

// demoConfigHeader starts the config.yaml of a demo's data dir, which
// marks the directory as one the demo may wipe.
const demoConfigHeader = "# Written by better-compute demo.\n"

const hardwareConfig = demoConfigHeader + `hardwareProfiles:
  emulated-redfish:
    description: emulated machines with Redfish BMCs, PXE-booted by the site agent
    drivers: {power: redfish, management: redfish, boot: ipxe, deploy: image-stream}
  emulated-ipmi:
    description: emulated machines with IPMI BMCs (ipmi_sim), PXE-booted by the site agent
    drivers: {power: ipmi, management: ipmi, boot: ipxe, deploy: image-stream}
`

// Stop stops everything, newest first. Safe to call twice.
func (d *Demo) Stop() {
	if d.Rack != nil {
		d.Rack.Close()
		d.Rack = nil
	}
	if d.rackProc != nil {
		d.rackProc.stop()
		d.rackProc = nil
	}
	if d.Agent != nil {
		d.Agent.Stop()
		d.Agent = nil
	}
	if d.Image != nil {
		d.Image.Close()
		d.Image = nil
	}
	if d.CP != nil {
		d.CP.Stop()
		d.CP = nil
	}
	if d.pgSampler != nil {
		d.pgSampler.Stop()
		d.pgSampler = nil
	}
}

func (d *Demo) say(format string, args ...any) {
	fmt.Fprintf(d.cfg.Out, "[%6.1fs] %s\n", time.Since(d.started).Seconds(), fmt.Sprintf(format, args...))
}
