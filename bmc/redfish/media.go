package redfish

import (
	"context"
	"slices"
	"sort"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/stmcginnis/gofish/redfish"
)

var _ bmc.Media = (*Driver)(nil)

// InsertMedia mounts url on the first CD/DVD virtual media drive that can
// insert (the system's own, else its managers'), reads it back to confirm
// the BMC holds it, and sets the boot override to Cd, Once (bmc.Media).
func (d *Driver) InsertMedia(ctx context.Context, url string) error {
	const op = "media.insert"
	if _, err := bmc.ParseMediaURL("url", url); err != nil {
		return err
	}
	cn, sys, err := d.connectSystem(ctx, op)
	if err != nil {
		return err
	}
	defer cn.close()
	drive, err := d.cdDrive(cn, sys, op)
	if err != nil {
		return err
	}
	if !(drive.Inserted && drive.Image == url) {
		if drive.Inserted {
			d.log.Info("redfish virtual media eject before insert", "media", drive.ODataID, "image", drive.Image)
			if err := drive.EjectMedia(); err != nil {
				return d.fail(op, err)
			}
		}
		d.log.Info("redfish virtual media insert", "media", drive.ODataID, "image", url)
		err := drive.InsertMediaConfig(redfish.VirtualMediaConfig{Image: url, Inserted: true, WriteProtected: true})
		if err != nil {
			return d.fail(op, err)
		}
		if err := d.confirmInserted(cn, drive.ODataID, url, op); err != nil {
			return err
		}
	}
	return d.override(cn, sys, op, bmc.BootCD, redfish.CdBootSourceOverrideTarget, false)
}

// confirmInserted reads the drive back: an insert the BMC accepted but does
// not show (a URL it could not fetch) is not a success.
func (d *Driver) confirmInserted(cn *conn, path, url, op string) error {
	vm, err := redfish.GetVirtualMedia(cn.c, path)
	if err != nil {
		return d.fail(op, err)
	}
	if !vm.Inserted || vm.Image != url {
		return errs.New(errs.DriverError, "BMC %s accepted the image but %s reports Inserted=%t Image=%q: check that the BMC can fetch %s",
			d.addr.HostPort(), path, vm.Inserted, vm.Image, url).WithOp(op)
	}
	return nil
}

// EjectMedia ejects every inserted CD/DVD drive and disables a boot
// override to Cd (bmc.Media).
func (d *Driver) EjectMedia(ctx context.Context) error {
	const op = "media.eject"
	cn, sys, err := d.connectSystem(ctx, op)
	if err != nil {
		return err
	}
	defer cn.close()
	drives, err := d.cdDrives(cn, sys, op)
	if err != nil {
		return err
	}
	for _, vm := range drives {
		if !vm.Inserted {
			continue
		}
		if !vm.SupportsMediaEject {
			return errs.New(errs.Unsupported, "BMC %s virtual media %s holds %q but offers no VirtualMedia.EjectMedia action",
				d.addr.HostPort(), vm.ODataID, vm.Image).WithOp(op)
		}
		d.log.Info("redfish virtual media eject", "media", vm.ODataID, "image", vm.Image)
		if err := vm.EjectMedia(); err != nil {
			return d.fail(op, err)
		}
	}
	return d.clearCdOverride(sys, op)
}

// clearCdOverride disables a boot override to Cd, which would boot the
// drive just emptied: one not yet consumed, or one a BMC that cannot boot
// once kept Continuous (boot.go, checkOverride).
func (d *Driver) clearCdOverride(sys *redfish.ComputerSystem, op string) error {
	b := sys.Boot
	if b.BootSourceOverrideTarget != redfish.CdBootSourceOverrideTarget ||
		b.BootSourceOverrideEnabled == "" || b.BootSourceOverrideEnabled == redfish.DisabledBootSourceOverrideEnabled {
		return nil
	}
	d.log.Info("redfish boot override to the emptied cd disabled", "system", sys.ODataID, "was", string(b.BootSourceOverrideEnabled))
	type boot struct {
		BootSourceOverrideEnabled redfish.BootSourceOverrideEnabled
	}
	if err := sys.Patch(sys.ODataID, struct{ Boot boot }{boot{redfish.DisabledBootSourceOverrideEnabled}}); err != nil {
		return d.fail(op, err)
	}
	return nil
}

// cdDrive returns the drive to insert into: the first CD/DVD drive with an
// InsertMedia action, or UNSUPPORTED saying what the BMC has.
func (d *Driver) cdDrive(cn *conn, sys *redfish.ComputerSystem, op string) (*redfish.VirtualMedia, error) {
	drives, err := d.cdDrives(cn, sys, op)
	if err != nil {
		return nil, err
	}
	for _, vm := range drives {
		if vm.SupportsMediaInsert {
			return vm, nil
		}
	}
	if len(drives) == 0 {
		return nil, errs.New(errs.Unsupported, "BMC %s has no CD/DVD virtual media for %s or its managers: boot this machine from the network instead",
			d.addr.HostPort(), sys.ODataID).WithOp(op)
	}
	return nil, errs.New(errs.Unsupported, "BMC %s has CD/DVD virtual media %s but no VirtualMedia.InsertMedia action on it",
		d.addr.HostPort(), drives[0].ODataID).WithOp(op)
}

// cdDrives lists the CD/DVD virtual media of the system, else of the
// managers that manage it (Redfish moved VirtualMedia from the Manager to
// the ComputerSystem; BMCs serve either), sorted by path.
func (d *Driver) cdDrives(cn *conn, sys *redfish.ComputerSystem, op string) ([]*redfish.VirtualMedia, error) {
	all, err := sys.VirtualMedia()
	if err != nil {
		return nil, d.fail(op, err)
	}
	if len(all) == 0 {
		managers, err := sys.ManagedBy()
		if err != nil {
			return nil, d.fail(op, err)
		}
		if len(managers) == 0 {
			if managers, err = cn.c.Service.Managers(); err != nil {
				return nil, d.fail(op, err)
			}
		}
		for _, m := range managers {
			vms, err := m.VirtualMedia()
			if err != nil {
				return nil, d.fail(op, err)
			}
			all = append(all, vms...)
		}
	}
	var cds []*redfish.VirtualMedia
	for _, vm := range all {
		if slices.Contains(vm.MediaTypes, redfish.CDMediaType) || slices.Contains(vm.MediaTypes, redfish.DVDMediaType) {
			cds = append(cds, vm)
		}
	}
	sort.Slice(cds, func(i, j int) bool { return cds[i].ODataID < cds[j].ODataID }) // gofish fetches members concurrently
	return cds, nil
}
