package redfishbmc

import (
	"fmt"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/bmc"
)

// machine is the emulated machine's mutable state, guarded by BMC.mu.
type machine struct {
	power       bmc.PowerState
	bootTarget  string
	bootEnabled string
	bootMode    string
	boots       int
	lastBoot    bmc.BootDevice
	resets      map[string]int
	calls       []string // the machine-changing requests accepted over Redfish, in order
}

// reset applies a ComputerSystem.Reset. It returns a message for a 400 answer
// when the request cannot be honoured.
func (b *BMC) reset(resetType string) (problem string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.resetTypes, resetType) {
		return fmt.Sprintf("ResetType %q is not one of the allowable values %s", resetType, strings.Join(b.resetTypes, ", "))
	}
	m := &b.m
	switch resetType {
	case "On", "ForceOn":
		if m.power == bmc.Off {
			b.land(b.powerOnLocked)
		}
	case "ForceOff", "GracefulShutdown":
		b.land(b.powerOffLocked)
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		b.land(b.powerOnLocked) // a restart boots the machine again; one that was off comes on
	case "PushPowerButton":
		if m.power == bmc.On {
			b.land(b.powerOffLocked)
		} else {
			b.land(b.powerOnLocked)
		}
	case "Nmi":
		if m.power == bmc.Off {
			return "the system is powered off; an NMI needs it on"
		}
	default:
		return fmt.Sprintf("ResetType %q is not implemented by the emulator", resetType)
	}
	m.resets[resetType]++
	m.calls = append(m.calls, "power:"+resetType) // under the lock that applied it, so calls keep their order
	b.log.Info("emulated BMC reset", "system", b.systemPath, "reset_type", resetType, "power", string(m.power))
	return ""
}

// powerOnLocked turns the machine on and boots it: a Once override is
// consumed and the OnBoot hook learns the device. Callers hold b.mu.
func (b *BMC) powerOnLocked() {
	m := &b.m
	m.power = bmc.On
	dev := b.cfg.DefaultBoot
	if m.bootEnabled == "Once" || m.bootEnabled == "Continuous" {
		if d, ok := deviceOf(m.bootTarget); ok {
			dev = d
		}
	}
	if m.bootEnabled == "Once" {
		m.bootEnabled = "Disabled"
	}
	m.boots++
	m.lastBoot = dev
	if hook := b.cfg.OnBoot; hook != nil {
		go hook(dev)
	}
}

// deviceOf maps a BootSourceOverrideTarget to a boot device; false for None.
// Targets with no bmc.BootDevice (Usb, UefiShell, …) map to their lowercase name.
func deviceOf(target string) (bmc.BootDevice, bool) {
	switch target {
	case "", "None":
		return "", false
	case "Pxe", "UefiHttp":
		return bmc.BootPXE, true
	case "Hdd":
		return bmc.BootDisk, true
	case "Cd":
		return bmc.BootCD, true
	case "BiosSetup":
		return bmc.BootBIOS, true
	}
	return bmc.BootDevice(strings.ToLower(target)), true
}

// SetPowerState changes the power as the machine itself would (an OS shutting
// down, a power button): powering on boots it like a reset does.
func (b *BMC) SetPowerState(s bmc.PowerState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case s == bmc.On && b.m.power == bmc.Off:
		b.powerOnLocked()
	case s == bmc.Off:
		b.powerOffLocked()
	}
}

// Rebooted records that the machine restarted by itself during its boot
// number boot (State.Boots then): its OS rebooted or its firmware reset it.
// It boots again as a restart does, consuming a Once override. It does
// nothing and returns false when the machine is off or has booted since,
// so a power request that came in meanwhile wins.
func (b *BMC) Rebooted(boot int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m.power != bmc.On || b.m.boots != boot {
		return false
	}
	b.powerOnLocked()
	return true
}

// PoweredOff records that the machine turned itself off during its boot
// number boot (its OS shut down, or it stopped). Like Rebooted, it does
// nothing and returns false when the machine is off or has booted since.
func (b *BMC) PoweredOff(boot int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m.power != bmc.On || b.m.boots != boot {
		return false
	}
	b.powerOffLocked()
	return true
}

// patchBoot applies a PATCH of the system's Boot object. It returns a message
// for a 400 answer when a value is not allowed.
func (b *BMC) patchBoot(boot map[string]any) (problem string) {
	next := map[string]string{}
	for k, v := range boot {
		s, ok := v.(string)
		if !ok {
			return fmt.Sprintf("Boot.%s must be a string", k)
		}
		var allowed []string
		switch k {
		case "BootSourceOverrideTarget":
			allowed = b.bootTargets
		case "BootSourceOverrideEnabled":
			allowed = []string{"Disabled", "Once", "Continuous"}
		case "BootSourceOverrideMode":
			allowed = []string{"UEFI", "Legacy"}
		default:
			return fmt.Sprintf("Boot.%s is not writable on this service", k)
		}
		if !slices.Contains(allowed, s) {
			return fmt.Sprintf("%q is not an allowable value for Boot.%s (%s)", s, k, strings.Join(allowed, ", "))
		}
		next[k] = s
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := next["BootSourceOverrideTarget"]; ok {
		b.m.bootTarget = v
	}
	if v, ok := next["BootSourceOverrideEnabled"]; ok {
		b.m.bootEnabled = v
		if v == "Once" && b.faults.ContinuousBoot {
			b.m.bootEnabled = "Continuous"
		}
	}
	if v, ok := next["BootSourceOverrideMode"]; ok {
		b.m.bootMode = v
	}
	if len(next) > 0 { // a PATCH without Boot values changed nothing
		b.m.calls = append(b.m.calls, bootCall(boot))
	}
	b.log.Info("emulated BMC boot override", "system", b.systemPath, "target", b.m.bootTarget, "enabled", b.m.bootEnabled)
	return ""
}

// renderSystem returns the system resource with the machine's live state.
func (b *BMC) renderSystem() map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.landDueLocked() // a BMC that advances when read (Faults.PowerOnRead)
	src := b.tree[b.systemPath]
	out := make(map[string]any, len(src))
	for k, v := range src {
		out[k] = v
	}
	out["PowerState"] = map[bmc.PowerState]string{bmc.On: "On", bmc.Off: "Off"}[b.m.power]
	boot := map[string]any{}
	if old, ok := src["Boot"].(map[string]any); ok {
		for k, v := range old {
			boot[k] = v
		}
	}
	boot["BootSourceOverrideTarget"] = b.m.bootTarget
	boot["BootSourceOverrideEnabled"] = b.m.bootEnabled
	boot["BootSourceOverrideMode"] = b.m.bootMode
	boot["BootSourceOverrideTarget@Redfish.AllowableValues"] = b.bootTargets
	out["Boot"] = boot
	actions := map[string]any{}
	if old, ok := src["Actions"].(map[string]any); ok {
		for k, v := range old {
			actions[k] = v
		}
	}
	actions["#ComputerSystem.Reset"] = map[string]any{"target": b.resetPath, "ResetType@Redfish.AllowableValues": b.resetTypes}
	out["Actions"] = actions
	return out
}
