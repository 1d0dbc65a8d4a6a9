package steps

import (
	"time"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
)

// Timeouts of the lifecycle's own commands.
const (
	inventoryTimeout = 15 * time.Minute // includes the ramdisk's boot
	wipeTimeout      = 12 * time.Hour
	cacheTimeout     = 4 * time.Hour
	// tableTimeout bounds a write of the site's boot table, which waits
	// for nothing but the site's disk and does not heartbeat: an attempt
	// whose site agent died, or whose completion was lost, is retried this
	// late (it was the BMC calls' 2 minutes).
	tableTimeout = 30 * time.Second
)

// lifecycle are the lifecycle's own commands, declared as steps like the
// others so that one registry says what every worker serves, where each
// runs and its timeout: bcd site registers its activities from the
// registry (activities/site), and the workflows send them with these
// timeouts. They are Lifecycle steps: their inputs are the kinds package's
// types, which the workflows make (a wipe's nonce, a boot entry's discovery
// token, a catalog entry), so no profile may use them and they declare no
// Input manifest. Each is safe to run again (workflows retry --from-step
// repeats them without --force): the drivers behind them are idempotent
// by contract, and a wipe run again wipes again, under the new run's nonce.
func lifecycle() []sdk.Step {
	site := func(id string, timeout time.Duration, doc string) sdk.Step {
		return sdk.Step{ID: id, RunsOn: sdk.Site, Timeout: timeout, RetrySafe: true, Lifecycle: true, Doc: doc}
	}
	ramdisk := func(id string, timeout time.Duration, doc string) sdk.Step {
		return sdk.Step{ID: id, RunsOn: sdk.Ramdisk, Timeout: timeout, RetrySafe: true, Lifecycle: true, Doc: doc}
	}
	return []sdk.Step{
		site(kinds.BMCInspect, BMCTimeout, "reads the machine's inventory and power state from its BMC (kinds.InspectInput)"),
		site(kinds.BootSetEntry, tableTimeout, "serves a machine that PXE-boots the ramdisk with a single-use discovery token, or its local disk (kinds.BootEntry)"),
		site(kinds.BootClearEntry, tableTimeout, "forgets a machine's boot entry (kinds.ClearEntryInput)"),
		site(kinds.CacheEnsureImage, cacheTimeout, "fetches a catalog image into the site cache and verifies its digest (kinds.EnsureImageInput)"),
		ramdisk(kinds.InventoryRefresh, inventoryTimeout, "reports the machine's disks, NICs and identity from the ramdisk"),
		ramdisk(kinds.DiskWipe, wipeTimeout, "wipes every disk and signs an attestation per disk, bound to the run's nonce (kinds.WipeInput)"),
		ramdisk(kinds.LogsCollect, inventoryTimeout, "returns the ramdisk's recent log"),
		ramdisk(kinds.DiagNVML, inventoryTimeout, "runs the GPU diagnostics through NVML"),
	}
}
