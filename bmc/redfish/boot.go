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
	return d.override(sys, op, dev, tgt, persistent)
}

// override PATCHes the system's Boot override to tgt, Once or Continuous.
func (d *Driver) override(sys *redfish.ComputerSystem, op string, dev bmc.BootDevice, tgt redfish.BootSourceOverrideTarget, persistent bool) error {
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
