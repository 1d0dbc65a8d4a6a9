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
		site(kinds.BootSetEntry, BMCTimeout, "serves a machine that PXE-boots the ramdisk with a single-use discovery token, or its local disk (kinds.BootEntry)"),
		site(kinds.BootClearEntry, BMCTimeout, "forgets a machine's boot entry (kinds.ClearEntryInput)"),
		site(kinds.CacheEnsureImage, cacheTimeout, "fetches a catalog image into the site cache and verifies its digest (kinds.EnsureImageInput)"),
		ramdisk(kinds.InventoryRefresh, inventoryTimeout, "reports the machine's disks, NICs and identity from the ramdisk"),
		ramdisk(kinds.DiskWipe, wipeTimeout, "wipes every disk and signs an attestation per disk, bound to the run's nonce (kinds.WipeInput)"),
		ramdisk(kinds.LogsCollect, inventoryTimeout, "returns the ramdisk's recent log"),
		ramdisk(kinds.DiagNVML, inventoryTimeout, "runs the GPU diagnostics through NVML"),
	}
}
