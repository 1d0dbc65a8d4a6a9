// Package steps declares better-compute's built-in steps with the plugin
// SDK (sdk), as a plugin author declares theirs: deploy.image and
// boot.kexec (relayed to the ramdisk), power.setPower,
// management.setBootDevice, media.insert and media.eject (run by the site
// agent), wait.agentJoined (on the control plane, agentjoined.go), and the
// lifecycle's own commands (disk.wipe, inventory.refresh, boot.setEntry…,
// lifecycle.go), which only the workflows send. Builtins is the plugin
// every worker registers first; Registry builds a worker's registry from
// it and a binary's own plugins.
//
// The site steps' Runs are nil here: bcd site serves them with its typed
// activities (activities/site), whose input is the step's with values plus
// the node's BMC target under "bmc" (see the sdk package doc).
package steps

import (
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
)

// PluginID is the built-in plugin's id.
const PluginID = "better-compute"

// Timeouts of the built-in steps (the lifecycle's own: lifecycle.go).
const (
	BMCTimeout    = 2 * time.Minute // one BMC call, its retries aside
	DeployTimeout = 4 * time.Hour   // streaming an image onto a disk
)

// Builtins returns the built-in steps as a plugin.
func Builtins() sdk.Plugin {
	// One function a step, each in the file of its concern (agentJoined:
	// agentjoined.go).
	list := []sdk.Step{deployImage(), bootKexec(), setPower(), setBootDevice(), mediaInsert(), mediaEject(), agentJoined()}
	return sdk.Plugin{ID: PluginID, Steps: append(list, lifecycle()...)}
}

// Registry is the registry of a worker running the built-ins and plugins;
// a plugin step may not take a Reserved id.
func Registry(plugins ...sdk.Plugin) (*sdk.Registry, error) {
	if err := checkReserved(plugins); err != nil {
		return nil, err
	}
	return sdk.NewRegistry(append([]sdk.Plugin{Builtins()}, plugins...)...)
}

// Formats are the image formats the ramdisk writes.
func Formats() []string { return []string{"raw"} }

func deployImage() sdk.Step {
	return sdk.Step{ID: kinds.DeployImage, RunsOn: sdk.Ramdisk, Timeout: DeployTimeout, RetrySafe: true,
		Needs: []sdk.Need{sdk.NeedsRamdisk},
		Doc:   "boots the ramdisk and streams a catalog image, pinned at the site cache, onto a disk",
		Input: sdk.Manifest{
			{Name: "image", Type: sdk.Image, Required: true, Doc: "the catalog image to write"},
			{Name: "disk", Type: sdk.String, Doc: "the target disk (WWN or serial); the first disk when left out"},
			{Name: "format", Type: sdk.String, Default: "raw", Enum: Formats(), Doc: "the image's format"},
			{Name: "userDataRef", Type: sdk.String, Doc: "secret://TENANT/NAME of the profile's tenant holding a userData template, rendered for each node and written to a cidata partition"},
		},
		Outputs: []string{"disk", "bytesWritten", "digest"},
	}
}

func bootKexec() sdk.Step {
	return sdk.Step{ID: kinds.BootKexec, RunsOn: sdk.Ramdisk, Timeout: BMCTimeout, RetrySafe: true,
		Needs: []sdk.Need{sdk.NeedsRamdisk}, After: []string{kinds.DeployImage},
		Doc: "sets the machine's next boots to its disk and kexecs the OS deploy.image wrote"}
}

func setPower() sdk.Step {
	return sdk.Step{ID: kinds.PowerSetPower, RunsOn: sdk.Site, Timeout: BMCTimeout, RetrySafe: true,
		Doc: "performs a power action through the node's BMC",
		Input: sdk.Manifest{{Name: "action", Type: sdk.String, Required: true, Enum: names(bmc.PowerActions()),
			Doc: "the power action"}},
		Outputs: []string{"powerState"},
	}
}

func setBootDevice() sdk.Step {
	return sdk.Step{ID: kinds.ManagementSetBootDevice, RunsOn: sdk.Site, Timeout: BMCTimeout, RetrySafe: true,
		Doc: "sets the device the machine boots from next",
		Input: sdk.Manifest{
			{Name: "device", Type: sdk.String, Required: true, Enum: names(bmc.BootDevices()), Doc: "the boot device"},
			{Name: "persistent", Type: sdk.Bool, Default: false, Doc: "every boot, not only the next"},
		},
	}
}

func mediaInsert() sdk.Step {
	return sdk.Step{ID: kinds.MediaInsert, RunsOn: sdk.Site, Timeout: BMCTimeout, RetrySafe: true,
		Needs: []sdk.Need{sdk.NeedsVirtualMedia},
		Doc:   "mounts an ISO on the BMC's virtual media, booted from once",
		Input: sdk.Manifest{{Name: "url", Type: sdk.String, Required: true, FromStep: true,
			Doc: "the ISO's URL, which the BMC fetches itself", Check: mediaURL}},
	}
}

func mediaEject() sdk.Step {
	return sdk.Step{ID: kinds.MediaEject, RunsOn: sdk.Site, Timeout: BMCTimeout, RetrySafe: true,
		Needs: []sdk.Need{sdk.NeedsVirtualMedia}, Doc: "empties the BMC's virtual media"}
}

func mediaURL(v any) error {
	_, err := bmc.ParseMediaURL("url", v.(string))
	return err
}

func names[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// builtinTimeouts are the built-in steps' timeouts, by id.
var builtinTimeouts = func() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, s := range Builtins().Steps {
		out[s.ID] = s.Timeout
	}
	return out
}()

// Timeout is the timeout of the built-in step id, a lifecycle command's
// included. An id that is not one panics: the workflows name only
// built-ins, which TestWorkflowsSendBuiltins checks.
func Timeout(id string) time.Duration {
	t, ok := builtinTimeouts[id]
	if !ok {
		panic("steps.Timeout: " + id + " is not a built-in step")
	}
	return t
}
