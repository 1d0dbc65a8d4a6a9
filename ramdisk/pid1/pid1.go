// Package pid1 owns what `bcd ramdisk` does as the ramdisk's /init before
// and after the agent: it mounts /proc, /sys, /dev, /run and /tmp, loads
// the kernel modules the initramfs carries, brings up the interface the
// machine booted from (BOOTIF on the kernel command line) by DHCP, checks
// that the site's relay answers, and runs the agent. Every step prints one
// line to the console; a step that fails after its retries prints why and
// reboots the machine, so it PXE-boots again instead of hanging.
package pid1

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/better-compute/better-compute/ramdisk/agent"
)

// Config is what Run needs.
type Config struct {
	// Console receives the progress lines (PID 1's stderr is /dev/console).
	Console io.Writer
	// Agent runs the agent on the kernel command line once the network is up.
	Agent func(ctx context.Context, cmdline string) error
	// RebootDelay is how long a failure stays on the console before the
	// reboot; 15s when zero.
	RebootDelay time.Duration
}

// Timings of the network steps: bounded so a machine never hangs silently.
const (
	linkWait      = 20 * time.Second // for the boot interface's driver to register it
	dhcpRounds    = 4                // DHCP attempts before the reboot
	dhcpTimeout   = 5 * time.Second  // per DHCP exchange
	relayDeadline = 2 * time.Minute  // for the site's relay to accept a connection
)

// say prints one line to the console.
func (c *Config) say(format string, args ...any) {
	fmt.Fprintf(c.Console, "better-compute ramdisk: "+format+"\n", args...)
}

// Run is /init: it sets the machine up, runs the agent, and reboots when
// the agent ends or a step fails. It returns only if the reboot fails.
func Run(ctx context.Context, cfg Config) error {
	if cfg.RebootDelay <= 0 {
		cfg.RebootDelay = 15 * time.Second
	}
	start := time.Now()
	err := boot(ctx, &cfg)
	if err == nil {
		cfg.say("the agent stopped after %v", time.Since(start).Round(time.Second))
	} else {
		cfg.say("FAILED: %v", err)
	}
	cfg.say("rebooting in %v", cfg.RebootDelay)
	time.Sleep(cfg.RebootDelay)
	return reboot()
}

// boot runs the steps in order; the first that fails ends it.
func boot(ctx context.Context, cfg *Config) error {
	if err := mountAll(); err != nil {
		return err
	}
	rel, loaded, errs := loadModules()
	for _, e := range errs {
		cfg.say("module: %v", e)
	}
	cfg.say("kernel %s, %d modules loaded", rel, loaded)
	cmdline, err := readCmdline()
	if err != nil {
		return err
	}
	b, err := agent.ParseCmdline(cmdline)
	if err != nil {
		return fmt.Errorf("the kernel command line: %w", err)
	}
	mac, err := BootMAC(cmdline)
	if err != nil {
		return err
	}
	if err := network(ctx, cfg, mac); err != nil {
		return err
	}
	if err := reachRelay(ctx, cfg, b.Site); err != nil {
		return err
	}
	cfg.say("starting the agent for %s (site %s)", b.NodeID, b.Site)
	return cfg.Agent(ctx, cmdline)
}

// reachRelay waits until the relay accepts a TCP connection, printing each
// failure, for at most relayDeadline.
func reachRelay(ctx context.Context, cfg *Config, site string) error {
	u, err := url.Parse(site)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, relayDeadline)
	defer cancel()
	var d net.Dialer
	for wait := time.Second; ; wait = min(2*wait, 15*time.Second) {
		c, err := d.DialContext(ctx, "tcp", u.Host)
		if err == nil {
			c.Close()
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the site's relay %s did not answer for %v (last: %v); check the site agent and the route to it", u.Host, relayDeadline, err)
		}
		cfg.say("the site's relay %s does not answer (%v); retrying in %v", u.Host, err, wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}
