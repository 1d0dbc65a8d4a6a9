package ipmi

import (
	"context"

	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// selector maps boot devices to IPMI boot device selectors.
func selector(dev bmc.BootDevice) (types.BootDeviceSelector, bool) {
	switch dev {
	case bmc.BootPXE:
		return types.BootDeviceSelectorForcePXE, true
	case bmc.BootDisk:
		return types.BootDeviceSelectorForceHardDrive, true
	case bmc.BootCD:
		return types.BootDeviceSelectorForceCDROM, true
	case bmc.BootBIOS:
		return types.BootDeviceSelectorForceBIOSSetup, true
	}
	return 0, false
}

// bootFlags is the boot flags parameter (5) for dev: valid, persistent or
// for the next boot only, EFI or legacy.
func bootFlags(sel types.BootDeviceSelector, persistent, efi bool) *types.BootOptionParam_BootFlags {
	return &types.BootOptionParam_BootFlags{BootFlagsValid: true, Persist: persistent,
		BIOSBootType: types.BIOSBootType(efi), BootDeviceSelector: sel}
}

// SetBootDevice writes the boot flags (Set System Boot Options, parameter 5)
// for dev, the next boot only or every boot when persistent, EFI unless the
// driver is configured for legacy boot, then reads them back: a BMC that
// does not report dev fails with DRIVER_ERROR. Safe to call twice: the
// second call writes the same flags.
func (d *Driver) SetBootDevice(ctx context.Context, dev bmc.BootDevice, persistent bool) error {
	const op = "management.setBootDevice"
	sel, ok := selector(dev)
	if !ok {
		_, err := bmc.ParseBootDevice(string(dev))
		return err
	}
	s, ctx, err := d.open(ctx, op, d.timeout)
	if err != nil {
		return err
	}
	defer s.close()
	d.log.Info("ipmi boot flags", "device", string(dev), "persistent", persistent, "efi", d.efi)
	if err := s.c.SetSystemBootOptionsParamFor(ctx, bootFlags(sel, persistent, d.efi)); err != nil {
		return d.fail(op, err)
	}
	got := &types.BootOptionParam_BootFlags{}
	if err := s.c.GetSystemBootOptionsParamFor(ctx, got); err != nil {
		return d.fail(op, err)
	}
	if got.BootDeviceSelector != sel {
		return errs.New(errs.DriverError, "BMC %s reports boot device %q after it was set to %q (%s): it did not take the boot flags",
			d.host(), got.BootDeviceSelector, sel, dev).WithOp(op)
	}
	return nil
}
