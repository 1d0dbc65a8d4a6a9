// Package fake owns an in-memory bmc.Driver for tests of the code that drives
// BMCs (the site's activities): it keeps power and boot state like a real
// machine, boots from a one-time override once, counts calls, and fails on
// demand through error knobs.
package fake

import (
	"context"
	"slices"
	"sync"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// Method names for SetErr and Calls.
const (
	SetPower      = "SetPower"
	PowerState    = "PowerState"
	SetBootDevice = "SetBootDevice"
	Inspect       = "Inspect"
)

// Driver is a fake BMC. Safe for concurrent use.
type Driver struct {
	mu          sync.Mutex
	power       bmc.PowerState
	override    bmc.BootDevice
	persistent  bool
	inv         bmc.Inventory
	unsupported []bmc.PowerAction
	errs        map[string]error
	calls       map[string]int
	boots       []bmc.BootDevice
	closed      bool
}

var _ bmc.Driver = (*Driver)(nil)

// New returns a fake of a machine that is off, boots from disk and reports inv.
// Actions in unsupported fail with UNSUPPORTED, as a BMC that does not allow them.
func New(inv bmc.Inventory, unsupported ...bmc.PowerAction) *Driver {
	return &Driver{power: bmc.Off, inv: inv, unsupported: unsupported, errs: map[string]error{}, calls: map[string]int{}}
}

// SetErr makes method fail with err until cleared with nil.
func (d *Driver) SetErr(method string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs[method] = err
}

// Calls returns how many times method was called.
func (d *Driver) Calls(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[method]
}

// Boots returns the device of each boot so far.
func (d *Driver) Boots() []bmc.BootDevice {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.boots)
}

// Closed reports whether Close was called.
func (d *Driver) Closed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *Driver) enter(method string) error {
	d.calls[method]++
	return d.errs[method]
}

// SetPower changes the power like bmc.Power documents; the change lands at
// once, so it is confirmed by one read.
func (d *Driver) SetPower(_ context.Context, a bmc.PowerAction) (bmc.PowerResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter(SetPower); err != nil {
		return bmc.PowerResult{}, err
	}
	if _, err := bmc.ParsePowerAction(string(a)); err != nil {
		return bmc.PowerResult{}, err
	}
	if slices.Contains(d.unsupported, a) {
		return bmc.PowerResult{}, errs.New(errs.Unsupported, "the fake BMC does not allow power action %q", a)
	}
	switch {
	case a == bmc.PowerOff || a == bmc.PowerGracefulOff:
		d.power = bmc.Off
	case a == bmc.PowerOn && d.power == bmc.On:
	case a == bmc.PowerNMI && d.power == bmc.Off:
		return bmc.PowerResult{}, errs.New(errs.InvalidState, "the machine is off: an NMI needs it on")
	case a == bmc.PowerNMI:
	default: // on from off, reset, graceful-restart, cycle
		d.bootLocked()
	}
	return bmc.PowerResult{State: d.power, Reads: 1}, nil
}

func (d *Driver) bootLocked() {
	d.power = bmc.On
	dev := bmc.BootDisk
	if d.override != "" {
		dev = d.override
		if !d.persistent {
			d.override = ""
		}
	}
	d.boots = append(d.boots, dev)
}

// PowerState returns the power.
func (d *Driver) PowerState(context.Context) (bmc.PowerState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter(PowerState); err != nil {
		return "", err
	}
	return d.power, nil
}

// SetBootDevice sets the override for the next boot, or every boot when persistent.
func (d *Driver) SetBootDevice(_ context.Context, dev bmc.BootDevice, persistent bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter(SetBootDevice); err != nil {
		return err
	}
	if _, err := bmc.ParseBootDevice(string(dev)); err != nil {
		return err
	}
	d.override, d.persistent = dev, persistent
	return nil
}

// Inspect returns the inventory given to New.
func (d *Driver) Inspect(context.Context) (bmc.Inventory, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter(Inspect); err != nil {
		return bmc.Inventory{}, err
	}
	inv := d.inv
	inv.MACs = slices.Clone(inv.MACs)
	return inv, nil
}

// Close marks the driver closed. Safe to call twice.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}
