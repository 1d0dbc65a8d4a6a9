// Package agent owns `bcd ramdisk`, the agent inside the PXE-booted ramdisk:
// it reads the site, node, discovery token and CA pin from the kernel command
// line, makes an Ed25519 key, joins through the site agent's relay (token →
// certificate for its own key), then long-polls the relay for commands and
// runs them — inventory.refresh, disk.wipe (with signed attestations),
// deploy.image (resumable), boot.kexec, logs.collect, diag.nvml — posting
// progress while they run and a result signed with its key. A command id is
// never run twice: a repeat gets the kept result.
package agent

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/ramdisk/disk"
	"github.com/better-compute/better-compute/sdk"
)

// Config is what Run needs. Only Cmdline is required.
type Config struct {
	// Cmdline is the kernel command line; the real main reads /proc/cmdline.
	Cmdline string
	// Disks is the machine's disks (under fakehw, the directory of fake disks).
	Disks disk.Host
	// NICs are the machine's network interfaces; nil reads net.Interfaces.
	NICs []NIC
	// MemoryBytes is the machine's memory; 0 reads /proc/meminfo under Root.
	MemoryBytes int64
	// CPUs is the number of logical CPUs; 0 reads the machine.
	CPUs int
	// ProductUUID is the SMBIOS system UUID; "" reads
	// /sys/class/dmi/id/product_uuid under Root.
	ProductUUID string
	// Root is where /proc and /sys are read from; "" means "/".
	Root string
	// BootURL is the site's HTTP boot listener (http://host:port) used when
	// the command line has no bc.boot: images are fetched from it.
	BootURL string
	// PollWait is how long one long-poll may wait; 25s when zero.
	PollWait time.Duration
	// ProgressEvery is how often progress is posted while a command runs; 1s when zero.
	ProgressEvery time.Duration
	// MaxBackoff caps the delay between retries of relay calls; 5s when zero.
	MaxBackoff time.Duration
	Logger     *slog.Logger
	// OnKexec is called after a successful boot.kexec (its result posted),
	// so an emulated machine can "boot the OS"; Run then returns.
	OnKexec func()
	// OnCommand, when set, is called with a command's kind each time the
	// agent starts running one (not when it posts a kept result again), so
	// an emulated machine can record what its ramdisk ran.
	OnCommand func(kind string)
	// Plugins are the plugins whose ramdisk steps (RunsOn sdk.Ramdisk, with
	// a Run) this ramdisk runs beside the built-in kinds, as a plugin
	// author's bcd build passes the same plugins to its site agent
	// (siteagent.Config.Plugins); a ramdisk without the plugin answers its
	// steps UNSUPPORTED, naming what it runs.
	Plugins []sdk.Plugin
	// Tracer records a span of each command run, from its start to its
	// result posted, a child of the site's span of the command (the relay's
	// traceparent); nil for none.
	Tracer trace.TracerProvider
}

func (c *Config) fill() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Root == "" {
		c.Root = "/"
	}
	if c.PollWait <= 0 {
		c.PollWait = 25 * time.Second
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Second
	}
}

// agent is one run of the ramdisk.
type agent struct {
	cfg    Config
	boot   Boot
	nodeID string
	// plugins are the plugin steps it runs, by id (Config.Plugins).
	plugins map[string]sdk.Step
	log     *slog.Logger
	logs    *ring
	key     ed25519.PrivateKey
	relay   *relay
	stop    context.CancelFunc // ends the poll loop (after kexec)
	wg      sync.WaitGroup

	mu     sync.Mutex
	cmds   map[string]*entry
	resume map[string]int64 // deploy.image: bytes safely on disk, by command id
}

// Run joins through the site named on cfg.Cmdline and serves commands until
// ctx is done (it then returns nil) or a boot.kexec succeeded. Network errors
// are retried with backoff; a command line that cannot be parsed or a join
// that the site refuses is returned as an error.
func Run(ctx context.Context, cfg Config) error {
	cfg.fill()
	plugins, err := pluginSteps(cfg.Plugins)
	if err != nil {
		return err
	}
	b, err := ParseCmdline(cfg.Cmdline)
	if err != nil {
		return err
	}
	if b.BootURL == "" {
		b.BootURL = cfg.BootURL
	}
	signer, _, err := pki.NewEd25519Key()
	if err != nil {
		return err
	}
	logs := newRing(maxLogLines)
	a := &agent{cfg: cfg, boot: b, nodeID: b.NodeID, logs: logs, key: signer.(ed25519.PrivateKey),
		relay: newRelay(b, signer), cmds: map[string]*entry{}, resume: map[string]int64{}, plugins: plugins}
	a.log = slog.New(newTee(cfg.Logger.Handler(), logs)).With("node", b.NodeID)
	a.log.Info("ramdisk: starting", "boot", b)
	if err := a.join(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return a.loop(ctx)
}

// join retries the join until the relay answers; a refusal is final.
func (a *agent) join(ctx context.Context) error {
	bo := backoff{max: a.cfg.MaxBackoff}
	for {
		id, err := a.relay.join(ctx, a.boot.Token)
		if err == nil {
			if id != "" && id != a.boot.NodeID {
				return errs.New(errs.InvalidState, "the site certified this ramdisk as %s but the command line says %s; PXE-boot it again", id, a.boot.NodeID)
			}
			a.log.Info("ramdisk: joined", "site", a.boot.Site)
			return nil
		}
		if !retryable(err) {
			return errs.Wrap(errs.KindOf(err), err, "join through the site relay %s", a.boot.Site)
		}
		d := bo.next()
		a.log.Warn("ramdisk: join failed; retrying", "err", err, "in", d)
		if !sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

// loop long-polls for commands until ctx is done or kexec stopped it.
func (a *agent) loop(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	a.stop = cancel
	defer a.wg.Wait()
	defer cancel()
	bo := backoff{max: a.cfg.MaxBackoff}
	for ctx.Err() == nil {
		cmd, hdr, err := a.relay.next(ctx, a.cfg.PollWait)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			d := bo.next()
			a.log.Warn("ramdisk: polling the relay failed; retrying", "err", err, "in", d)
			sleep(ctx, d)
			continue
		}
		bo.reset()
		if cmd != nil {
			a.dispatch(tracing.Extract(ctx, hdr), *cmd)
		}
	}
	a.log.Info("ramdisk: stopped")
	return nil
}
