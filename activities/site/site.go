// Package site owns the activities a site agent serves on its site's task
// queue, one per command kind: the BMC kinds (power.setPower,
// management.setBootDevice, bmc.inspect) through a driver registry built by
// main, the boot table kinds (boot.setEntry, boot.clearEntry), the image cache
// (cache.ensureImage), and the relay of every ramdisk kind to the machine's
// connected ramdisk. BMC credentials arrive as references (env://, secret://,
// vault://) and are resolved here, never logged. Every failure leaves as a
// Temporal application error whose type is the errs kind.
package site

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// DriverFactory opens a driver for one BMC. It must not keep credentials
// beyond the driver's life.
type DriverFactory func(ctx context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error)

// BootTable is the site's per-MAC boot table (siteagent/boot implements it).
type BootTable interface {
	// SetEntry replaces the node's entry. Safe to call twice.
	SetEntry(e kinds.BootEntry) error
	// ClearEntry forgets the node's entry; nothing if there is none.
	ClearEntry(nodeID string) error
	// Stalled returns BOOT_STALLED, naming where the node's ramdisk boot
	// stopped and what to check, when that boot has shown no progress for
	// longer than after, or at once when its ramdisk restarted (the machine
	// PXE-booted again after it joined, its token spent); nil while it
	// progresses, once its ramdisk joined, or when no boot is followed.
	Stalled(nodeID string, after time.Duration) error
	// Progress describes where the node's ramdisk boot is until its
	// ramdisk reached the relay; "" after, or when no boot is followed.
	Progress(nodeID string) string
}

// ImageCache is the site's content-addressed image cache (siteagent/cache).
type ImageCache interface {
	// Ensure makes the image present and verified, reporting bytes downloaded
	// so far to progress. Safe to call twice and concurrently.
	Ensure(ctx context.Context, in kinds.EnsureImageInput, progress func(bytes int64)) (kinds.EnsureImageOutput, error)
}

// Relay hands commands to a node's connected ramdisk (siteagent/relay).
type Relay interface {
	// Run sends cmd to cmd.NodeID's ramdisk, unless a result for cmd.ID is
	// already known, and waits for its result, reporting progress.
	Run(ctx context.Context, cmd kinds.Command, progress func(kinds.Progress)) (kinds.Result, error)
}

// RamdiskHearing is a Relay that knows whether a node's ramdisk is there:
// when it last talked to the relay (known), or when the relay started if
// never, and whether it is polling right now (siteagent/relay's does).
type RamdiskHearing interface {
	Heard(nodeID string) (at time.Time, known, polling bool)
}

// SecretResolver resolves a secret:// reference to its values, which it
// may keep a while (SecretsClient).
type SecretResolver interface {
	Resolve(ctx context.Context, ref string) (map[string]string, error)
	// Forget drops what is kept of ref, so the next Resolve asks again.
	Forget(ref string)
}

// Activities holds the dependencies of the site's activities. A nil
// dependency makes the kinds that need it fail with UNSUPPORTED.
type Activities struct {
	Drivers map[string]DriverFactory // by bmc driver name (redfish, ipmi)
	Secrets SecretResolver           // secret:// references
	// LookupEnv reads env:// references; the site agent passes os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// AllowEnv names the variables env:// may read besides those starting
	// with kinds.EnvSecretPrefix (bcd site --allow-env).
	AllowEnv []string
	// BMCs serializes the calls to each BMC host and holds its circuit
	// breaker; nil shares the process's gate (bmcgate.go).
	BMCs *BMCGate
	// BMCNetworks, when set, are the only networks a BMC may be reached in
	// (bcd site --bmc-network): credentials go to no other address.
	BMCNetworks []netip.Prefix
	Boot        BootTable
	Cache       ImageCache
	Relay       Relay
	// BootStall is how long a ramdisk boot may show no new milestone (PXE
	// answer, script, kernel, initramfs, relay) before a command waiting for
	// its ramdisk fails with BOOT_STALLED; DefaultBootStall when zero.
	BootStall time.Duration
	// RamdiskGone is how long a command may wait for a node whose ramdisk
	// is not heard from (no poll, progress or result) while no ramdisk boot
	// of it is in progress before it fails with BOOT_STALLED (the ramdisk
	// died; see ramdiskGone); DefaultRamdiskGone when zero. Only a Relay
	// that is a RamdiskHearing can tell.
	RamdiskGone time.Duration
	// Relayed hears each relayed command's kind and outcome (succeeded,
	// failed, stalled), for the metrics; nil counts nothing.
	Relayed func(kind, outcome string)
	// BMCCalls hears each call to a BMC (opening its driver, the call, and
	// closing it): the driver, the command kind, "ok" or the error's kind,
	// and how long it took; nil counts nothing.
	BMCCalls func(driver, call, outcome string, took time.Duration)
	// ImageWrote hears the bytes each succeeded deploy.image wrote; nil
	// counts nothing.
	ImageWrote func(bytes int64)
	Logger     *slog.Logger
}

// DefaultBootStall leaves a server's firmware time to power on and POST.
const DefaultBootStall = 5 * time.Minute

// DefaultRamdiskGone: a running ramdisk polls the relay at least every 25 s
// and retries a failed poll within 5 s, so 90 s unheard is none.
const DefaultRamdiskGone = 90 * time.Second

// typed are the site steps bcd site serves with activities of its own
// (each takes the kinds package's typed input), by step id; every other
// site step of a registry is served by its Run.
func (a *Activities) typed() map[string]any {
	return map[string]any{
		kinds.PowerSetPower:           a.SetPower,
		kinds.ManagementSetBootDevice: a.SetBootDevice,
		kinds.BMCInspect:              a.Inspect,
		kinds.MediaInsert:             a.MediaInsert,
		kinds.MediaEject:              a.MediaEject,
		kinds.BootSetEntry:            a.SetBootEntry,
		kinds.BootClearEntry:          a.ClearBootEntry,
		kinds.CacheEnsureImage:        a.EnsureImage,
	}
}

func (a *Activities) log() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

// toTemporal turns err into a Temporal application error whose type is its
// errs kind, non-retryable for final kinds. Context errors and errors that
// already are application errors pass unchanged.
func toTemporal(err error) error {
	if err == nil {
		return nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	k := errs.KindOf(err)
	return temporal.NewApplicationErrorWithOptions(err.Error(), string(k),
		temporal.ApplicationErrorOptions{NonRetryable: !k.Retryable()})
}
