package main

import (
	"os"
	"runtime/pprof"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/internal/logflag"
	"github.com/better-compute/better-compute/internal/tracing"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "control plane, site agent and an emulated rack in one process; every machine goes through its lifecycle (build with -tags fakehw)",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "machines", Value: 3},
			&cli.IntFlag{Name: "ipmi", Value: 1, Usage: "how many of the machines have IPMI BMCs (OpenIPMI's ipmi_sim); the rest have Redfish BMCs"},
			&cli.BoolFlag{Name: "once", Usage: "exit after the loop; non-zero if a machine failed"},
			&cli.StringFlag{Name: "data-dir", Value: demo.DefaultDataDir, Usage: "wiped at start"},
			&cli.StringFlag{Name: "listen", Value: controlplane.DefaultListen},
			&cli.StringFlag{Name: "temporal-listen", Value: controlplane.DefaultTemporalListen},
			&cli.StringFlag{Name: "ui-listen", Value: controlplane.DefaultUIListen},
			&cli.StringFlag{Name: "agents-listen", Value: controlplane.DefaultAgentsListen},
			&cli.StringFlag{Name: "log-level", Value: "warn"},
			&cli.StringFlag{Name: "cpu-profile", Usage: "write a CPU profile (go tool pprof) of the whole run to this file"},
			&cli.BoolFlag{Name: "rack-process", Usage: "run the emulated rack in a process of its own, so the peak RSS printed at the end splits control plane and rack"},
			logflag.Format(),
		},
		Action: func(c *cli.Context) error {
			log := logflag.Logger(c)
			tp, stop, err := tracing.Start(c.Context, tracing.FromEnv(os.Getenv, "better-compute-demo"))
			if err != nil {
				return err
			}
			defer tracing.Stop(stop, log)
			if p := c.String("cpu-profile"); p != "" {
				stop, err := startCPUProfile(p)
				if err != nil {
					return err
				}
				defer stop()
			}
			var rack []string
			if c.Bool("rack-process") {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				rack = []string{exe, "demo-rack", "--log-level", c.String("log-level")}
			}
			return demo.Run(c.Context, demo.Config{Machines: c.Int("machines"), IPMI: c.Int("ipmi"), Once: c.Bool("once"),
				DataDir: c.String("data-dir"), Out: c.App.Writer, Logger: log, Tracer: tp,
				Listen: c.String("listen"), TemporalListen: c.String("temporal-listen"),
				UIListen: c.String("ui-listen"), AgentsListen: c.String("agents-listen"), RackCommand: rack})
		},
	}
}

// demoRackCommand is demo --rack-process's rack: bcd emulate's, in this
// binary, so the demo needs no second one.
func demoRackCommand() *cli.Command {
	return &cli.Command{
		Name:   "demo-rack",
		Hidden: true,
		Usage:  "the emulated rack of demo --rack-process (as bcd emulate)",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "machines", Value: 3},
			&cli.IntFlag{Name: "ipmi"},
			&cli.StringFlag{Name: "dir", Required: true},
			&cli.StringFlag{Name: "boot-url", Required: true},
			&cli.StringFlag{Name: "bmc-username", Value: "admin"},
			&cli.StringFlag{Name: "bmc-password-file", Required: true},
			&cli.StringFlag{Name: "log-level", Value: "warn"},
			&cli.StringFlag{Name: "cpu-profile", Usage: "write a CPU profile (go tool pprof) of the rack's whole run to this file"},
			logflag.Format(),
		},
		Action: func(c *cli.Context) error {
			pw, err := os.ReadFile(c.String("bmc-password-file"))
			if err != nil {
				return err
			}
			if p := c.String("cpu-profile"); p != "" {
				stop, err := startCPUProfile(p)
				if err != nil {
					return err
				}
				defer stop()
			}
			return emulate.Run(c.Context, emulate.Config{Machines: c.Int("machines"), IPMI: c.Int("ipmi"), Dir: c.String("dir"),
				BootURL: c.String("boot-url"), Username: c.String("bmc-username"),
				Password: strings.TrimRight(string(pw), "\r\n"), Logger: logflag.Logger(c)}, c.App.Writer)
		},
	}
}

// startCPUProfile profiles the process's CPU into path until the returned
// func is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
