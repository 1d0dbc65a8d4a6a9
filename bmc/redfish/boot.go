package redfish

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/stmcginnis/gofish/redfish"
)

// targets maps boot devices to Redfish BootSourceOverrideTarget values.
func target(dev bmc.BootDevice) (redfish.BootSourceOverrideTarget, bool) {
	switch dev {
	case bmc.BootPXE:
		return redfish.PxeBootSourceOverrideTarget, true
	case bmc.BootDisk:
		return redfish.HddBootSourceOverrideTarget, true
	case bmc.BootCD:
		return redfish.CdBootSourceOverrideTarget, true
	case bmc.BootBIOS:
		return redfish.BiosSetupBootSourceOverrideTarget, true
	}
	return "", false
}

// SetBootDevice PATCHes the system's Boot override: the target for dev,
// enabled Once, or Continuous when persistent. Safe to call twice: the second
// PATCH writes the same values. A target the BMC does not list in
// BootSourceOverrideTarget@Redfish.AllowableValues fails with UNSUPPORTED.
// The override is read back (checkOverride): another target fails, a Once
// the BMC keeps Continuous is a warning in the log.
func (d *Driver) SetBootDevice(ctx context.Context, dev bmc.BootDevice, persistent bool) error {
	const op = "management.setBootDevice"
	tgt, ok := target(dev)
	if !ok {
		_, err := bmc.ParseBootDevice(string(dev))
		return err
	}
	cn, sys, err := d.connectSystem(ctx, op)
	if err != nil {
		return err
	}
	defer cn.close()
	return d.override(cn, sys, op, dev, tgt, persistent)
}

// override PATCHes the system's Boot override to tgt, Once or Continuous,
// and reads it back (checkOverride).
func (d *Driver) override(cn *conn, sys *redfish.ComputerSystem, op string, dev bmc.BootDevice, tgt redfish.BootSourceOverrideTarget, persistent bool) error {
	if allowed := allowedTargets(sys.RawData); len(allowed) > 0 && !slices.Contains(allowed, string(tgt)) {
		return errs.New(errs.Unsupported, "BMC %s cannot boot %s from %q (Redfish target %s): it allows %s",
			d.addr.HostPort(), sys.ODataID, dev, tgt, strings.Join(allowed, ", ")).WithOp(op)
	}
	enabled := redfish.OnceBootSourceOverrideEnabled
	if persistent {
		enabled = redfish.ContinuousBootSourceOverrideEnabled
	}
	type boot struct {
		BootSourceOverrideTarget  redfish.BootSourceOverrideTarget
		BootSourceOverrideEnabled redfish.BootSourceOverrideEnabled
	}
	d.log.Info("redfish boot override", "system", sys.ODataID, "device", string(dev), "enabled", string(enabled))
	if err := sys.Patch(sys.ODataID, struct{ Boot boot }{boot{tgt, enabled}}); err != nil {
		return d.fail(op, err)
	}
	return d.checkOverride(cn, sys.ODataID, op, dev, tgt, enabled)
}

// checkOverride reads the Boot override back after the PATCH. A target
// other than the one asked is a DRIVER_ERROR: the next boot would not be
// dev. Some BMCs cannot boot once and keep a Once override as Continuous:
// the machine then boots dev at its next boot, as asked, but at every later
// one too until another override replaces it. That is said, as a warning
// in the driver's log (bcd site's log), never taken silently; the call
// still succeeds, since the next boot is right and every later boot the
// lifecycle cares about sets its own override (disk, persistent, once the
// machine is deployed; disk when an abort leaves it safe).
func (d *Driver) checkOverride(cn *conn, path, op string, dev bmc.BootDevice, tgt redfish.BootSourceOverrideTarget, enabled redfish.BootSourceOverrideEnabled) error {
	back, err := redfish.GetComputerSystem(cn.c, path)
	if err != nil {
		return d.fail(op, err)
	}
	gotTgt, gotEnabled := back.Boot.BootSourceOverrideTarget, back.Boot.BootSourceOverrideEnabled
	asked, got := string(tgt)+"/"+string(enabled), string(gotTgt)+"/"+string(gotEnabled)
	switch {
	case gotTgt == tgt && gotEnabled == enabled:
		return nil
	case gotTgt == "": // a BMC that does not show its override: nothing to compare
		d.log.Warn("redfish boot override not reported back; trusting the BMC's acceptance", "system", path, "asked", asked)
		return nil
	case gotTgt != tgt:
		return errs.New(errs.DriverError, "BMC %s accepted the boot override %s for %s but reports %s: the next boot would not be %s; check the BMC's boot settings, then retry",
			d.addr.HostPort(), asked, path, got, dev).WithOp(op)
	}
	why := "the BMC changed when the override applies"
	if enabled == redfish.OnceBootSourceOverrideEnabled && gotEnabled == redfish.ContinuousBootSourceOverrideEnabled {
		why = "the BMC cannot boot once: the machine boots " + string(dev) + " at every boot until another override replaces it"
	}
	d.log.Warn("redfish boot override kept "+string(gotEnabled)+", not "+string(enabled)+" as asked",
		"system", path, "device", string(dev), "asked", asked, "reported", got, "consequence", why)
	return nil
}

// allowedTargets reads Boot.BootSourceOverrideTarget@Redfish.AllowableValues,
// which gofish does not parse; nil when the BMC does not say.
func allowedTargets(raw []byte) []string {
	var sys struct {
		Boot struct {
			Allowed []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
		}
	}
	if json.Unmarshal(raw, &sys) != nil {
		return nil
	}
	return sys.Boot.Allowed
}
