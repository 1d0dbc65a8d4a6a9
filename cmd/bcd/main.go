// Command bcd is the machine-side agent: `bcd site` (a site's agent),
// `bcd ramdisk` (inside the PXE-booted ramdisk), `bcd node` (an installed
// OS's agent) and `bcd emulate` (an emulated rack; build with -tags fakehw).
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/activities/site"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi"
	"github.com/better-compute/better-compute/bmc/redfish"
	bccli "github.com/better-compute/better-compute/cli"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/internal/buildinfo"
	"github.com/better-compute/better-compute/internal/logflag"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/ramdisk/agent"
	"github.com/better-compute/better-compute/ramdisk/disk"
	"github.com/better-compute/better-compute/ramdisk/pid1"
	"github.com/better-compute/better-compute/siteagent"
	"github.com/better-compute/better-compute/siteagent/pxe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bccli.Run(ctx, app(), os.Args, os.Stderr)
	stop()
	os.Exit(code)
}

// drivers is bcd site's BMC driver registry; the drivers log to log (what
// each BMC was asked and answered, never a credential).
func drivers(log *slog.Logger) map[string]siteagent.DriverFactory {
	return map[string]siteagent.DriverFactory{
		bmc.DriverRedfish: func(_ context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
			return redfish.New(redfish.Config{Address: addr, Credentials: creds, Logger: log})
		},
		bmc.DriverIPMI: func(_ context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
			return ipmi.New(ipmi.Config{Address: addr, Credentials: creds, Logger: log})
		},
	}
}

func app() *cli.App {
	logLevel := &cli.StringFlag{Name: "log-level", Value: "info"}
	logFormat := logflag.Format()
	a := &cli.App{
		Name:    "bcd",
		Usage:   "better-compute's machine-side agent",
		Version: buildinfo.Read().String(),
		Commands: []*cli.Command{
			{
				Name:  "site",
				Usage: "run a site agent: joins with a site token, then serves the site's task queue, iPXE, the image cache and the ramdisk relay",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "control-plane", Required: true, Usage: "the control plane's agents listener, https://host:7781"},
					&cli.StringFlag{Name: "ca-file", Required: true, Usage: "the project CA certificate (pki/ca.crt)"},
					&cli.StringFlag{Name: "token-file", Usage: "the site token (first start only)"},
					&cli.StringFlag{Name: "data-dir", Value: "/var/lib/bcd-site"},
					&cli.StringFlag{Name: "boot-listen", Value: ":8080", Usage: "plain HTTP for iPXE and the image cache"},
					&cli.StringFlag{Name: "relay-listen", Value: ":8443", Usage: "HTTPS (mTLS) for ramdisks"},
					&cli.StringFlag{Name: "ramdisk-dir", Usage: "vmlinuz and initrd.img to serve"},
					&cli.DurationFlag{Name: "boot-stall", Value: site.DefaultBootStall,
						Usage: "a ramdisk boot showing no progress this long fails with BOOT_STALLED and is power-cycled again"},
					&cli.StringFlag{Name: "advertise-host", Usage: "the host machines reach this agent at (default: the --pxe-interface address, else the listeners')"},
					&cli.StringFlag{Name: "pxe-interface", Usage: "serve proxy DHCP (67, 4011) and TFTP (69) for iPXE on this provisioning interface; off when empty"},
					&cli.StringFlag{Name: "pxe-server-addr", Usage: "this agent's IPv4 address on --pxe-interface (default: its first)"},
					&cli.StringFlag{Name: "ipxe-bios", Value: pxe.DefaultBIOSFile, Usage: "iPXE for legacy BIOS, served over TFTP (Debian: apt-get install ipxe)"},
					&cli.StringFlag{Name: "ipxe-efi", Value: pxe.DefaultEFIFile, Usage: "iPXE for x86-64 UEFI, served over TFTP (snponly.efi or ipxe.efi)"},
					&cli.StringFlag{Name: "metrics-listen", Value: "off",
						Usage: "serve Prometheus /metrics here (e.g. 127.0.0.1:9091); off for none"},
					&cli.StringSliceFlag{Name: "allow-env",
						Usage: "an env:// credentials variable to read besides BCD_SECRET_* (repeatable; the API accepts only BCD_SECRET_* at enroll, so this serves nodes enrolled before that rule)"},
					&cli.StringSliceFlag{Name: "bmc-network",
						Usage: "a network (CIDR) the site's BMCs are in (repeatable); when given, a BMC address outside every one gets no credentials and its command fails PERMISSION_DENIED"},
					&cli.IntFlag{Name: "bmc-breaker-failures", Value: site.DefaultBreakerFailures,
						Usage: "transport failures in a row (no answer, a timeout, an HTTP 5xx) that open a BMC's circuit breaker: its commands then fail at once until the cool-down ends"},
					&cli.DurationFlag{Name: "bmc-breaker-cooldown", Value: site.DefaultBreakerCoolDown,
						Usage: "how long a BMC's open breaker fails its commands before one probe"},
					logLevel, logFormat,
				},
				Action: func(c *cli.Context) error {
					bmcNets, err := site.ParseBMCNetworks(c.StringSlice("bmc-network"))
					if err != nil {
						return err
					}
					gate, err := site.ParseBMCGate(c.Int("bmc-breaker-failures"), c.Duration("bmc-breaker-cooldown"))
					if err != nil {
						return err
					}
					log := logflag.Logger(c)
					tp, stop, err := tracing.Start(c.Context, tracing.FromEnv(os.Getenv, "bcd-site"))
					if err != nil {
						return err
					}
					defer tracing.Stop(stop, log)
					// The Redfish sessions kept between commands are logged out on the way out.
					defer func() {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						redfish.LogoutAll(ctx)
					}()
					return siteagent.Run(c.Context, siteagent.Config{ControlPlaneURL: c.String("control-plane"),
						CAFile: c.String("ca-file"), TokenFile: c.String("token-file"), DataDir: c.String("data-dir"),
						BootListen: c.String("boot-listen"), RelayListen: c.String("relay-listen"),
						RamdiskDir: c.String("ramdisk-dir"), AdvertiseHost: c.String("advertise-host"), BootStall: c.Duration("boot-stall"),
						PXE: pxe.Config{Interface: c.String("pxe-interface"), ServerAddr: c.String("pxe-server-addr"),
							BIOSFile: c.String("ipxe-bios"), EFIFile: c.String("ipxe-efi")},
						MetricsListen: c.String("metrics-listen"), AllowEnv: c.StringSlice("allow-env"), BMCNetworks: bmcNets, BMCGate: gate, Drivers: drivers(log), Logger: log, Tracer: tp})
				},
			},
			{
				Name:  "ramdisk",
				Usage: "run the ramdisk agent with the kernel command line's bc.site, bc.node, bc.token and bc.ca (as PID 1, the initramfs's /init: mount, load modules, DHCP on BOOTIF, then the agent)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "cmdline-file", Value: "/proc/cmdline"},
					&cli.StringFlag{Name: "disks", Usage: "fakehw builds: the directory of fake disks"},
					logLevel, logFormat,
				},
				Action: func(c *cli.Context) error {
					log := logflag.Logger(c)
					tp, stop, err := tracing.Start(c.Context, tracing.FromEnv(os.Getenv, "bcd-ramdisk"))
					if err != nil {
						return err
					}
					defer tracing.Stop(stop, log)
					runAgent := func(ctx context.Context, cmdline string) error {
						return agent.Run(ctx, agent.Config{Cmdline: cmdline, Disks: disk.Host{Dir: c.String("disks")}, Logger: log, Tracer: tp})
					}
					if os.Getpid() == 1 { // the initramfs's /init: set the machine up first, reboot at the end
						return pid1.Run(c.Context, pid1.Config{Console: os.Stderr, Agent: runAgent})
					}
					cmdline, err := os.ReadFile(c.String("cmdline-file"))
					if err != nil {
						return err
					}
					return runAgent(c.Context, string(cmdline))
				},
			},
			nodeCommand(logLevel, logFormat),
			{
				Name:  "emulate",
				Usage: "run an emulated rack of machines with Redfish or IPMI BMCs on loopback and print them as JSON (fakehw builds)",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "machines", Value: 3},
					&cli.IntFlag{Name: "ipmi", Usage: "how many of the machines (the last) have IPMI BMCs, OpenIPMI's ipmi_sim"},
					&cli.StringFlag{Name: "dir", Value: "./rack"},
					&cli.StringFlag{Name: "boot-url", Required: true, Usage: "the site agent's boot listener, http://host:port"},
					&cli.StringFlag{Name: "bmc-username", Value: "admin"},
					&cli.StringFlag{Name: "bmc-password-file", Required: true},
					&cli.StringFlag{Name: "redfish-mockup", Usage: "a DMTF Redfish mockup to seed the BMCs"},
					logLevel, logFormat,
				},
				Action: func(c *cli.Context) error {
					pw, err := os.ReadFile(c.String("bmc-password-file"))
					if err != nil {
						return err
					}
					return emulate.Run(c.Context, emulate.Config{Machines: c.Int("machines"), IPMI: c.Int("ipmi"), Dir: c.String("dir"),
						BootURL: c.String("boot-url"), Username: c.String("bmc-username"),
						Password: string(trimNL(pw)), MockupDir: c.String("redfish-mockup"),
						Logger: logflag.Logger(c)}, c.App.Writer)
				},
			},
		},
	}
	bccli.Prepare(a) // usage errors as INVALID_INPUT (exit 2), like better-compute's
	return a
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
