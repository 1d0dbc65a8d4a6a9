package site

import (
	"context"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// SetPower is power.setPower: it performs the action, which the driver
// confirms by reading the state back, and reports the state the BMC
// reached and how long that took; both stay in the command's result.
func (a *Activities) SetPower(ctx context.Context, in kinds.SetPowerInput) (kinds.SetPowerOutput, error) {
	if _, err := bmc.ParsePowerAction(string(in.Action)); err != nil {
		return kinds.SetPowerOutput{}, toTemporal(err)
	}
	var res bmc.PowerResult
	err := a.withDriver(ctx, kinds.PowerSetPower, in.BMC, func(d bmc.Driver) error {
		var err error
		res, err = d.SetPower(ctx, in.Action)
		return err
	})
	out := kinds.SetPowerOutput{PowerState: res.State, ConfirmedMs: res.Took.Milliseconds(), PowerReads: res.Reads}
	if err != nil {
		a.log().WarnContext(ctx, "power not set", "node", in.BMC.NodeID, "action", in.Action,
			"last_state", res.State, "after_ms", out.ConfirmedMs, "err", err)
		return out, toTemporal(err)
	}
	a.log().InfoContext(ctx, "power set", "node", in.BMC.NodeID, "action", in.Action, "state", out.PowerState,
		"confirmed_ms", out.ConfirmedMs, "reads", out.PowerReads)
	return out, nil
}

// SetBootDevice is management.setBootDevice.
func (a *Activities) SetBootDevice(ctx context.Context, in kinds.SetBootDeviceInput) error {
	if _, err := bmc.ParseBootDevice(string(in.Device)); err != nil {
		return toTemporal(err)
	}
	err := a.withDriver(ctx, kinds.ManagementSetBootDevice, in.BMC, func(d bmc.Driver) error {
		return d.SetBootDevice(ctx, in.Device, in.Persistent)
	})
	if err == nil {
		a.log().InfoContext(ctx, "boot device set", "node", in.BMC.NodeID, "device", in.Device, "persistent", in.Persistent)
	}
	return toTemporal(err)
}

// Inspect is bmc.inspect: the machine's inventory as its BMC reports it.
func (a *Activities) Inspect(ctx context.Context, in kinds.InspectInput) (kinds.InspectOutput, error) {
	var out kinds.InspectOutput
	err := a.withDriver(ctx, kinds.BMCInspect, in.BMC, func(d bmc.Driver) error {
		inv, err := d.Inspect(ctx)
		out.Inventory = inv
		return err
	})
	return out, toTemporal(err)
}

// withDriver opens the target's driver with its resolved credentials, runs
// fn and closes the driver.
func (a *Activities) withDriver(ctx context.Context, op string, t kinds.BMCTarget, fn func(bmc.Driver) error) error {
	addr, err := bmc.ParseAddress(t.Driver, t.Address)
	if err != nil {
		return withOp(err, op)
	}
	factory := a.Drivers[addr.Driver]
	if factory == nil {
		return errs.New(errs.Unsupported,
			"this site agent has no %q BMC driver; run a site agent built with it", addr.Driver).WithOp(op)
	}
	if err := a.checkBMCNetwork(ctx, addr); err != nil {
		return withOp(err, op)
	}
	fn = a.gated(ctx, addr, fn) // one conversation per BMC host, with its breaker (bmcgate.go)
	creds, err := a.credentials(ctx, t.CredentialsRef)
	if err != nil {
		return withOp(err, op)
	}
	creds.TLS = t.TLS
	start := time.Now()
	err = a.callBMC(ctx, factory, addr, creds, fn)
	a.forgetRefused(t.CredentialsRef, err)
	a.countBMC(addr.Driver, op, err, time.Since(start))
	return withOp(err, op)
}

// callBMC opens the driver, runs fn and closes the driver: one BMC call,
// as the metrics count it.
func (a *Activities) callBMC(ctx context.Context, factory DriverFactory, addr bmc.Address, creds bmc.Credentials, fn func(bmc.Driver) error) error {
	d, err := factory(ctx, addr, creds)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(d)
}

// countBMC counts a call to a BMC: outcome "ok" or its error's kind.
func (a *Activities) countBMC(driver, call string, err error, took time.Duration) {
	if a.BMCCalls == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = string(errs.KindOf(err))
	}
	a.BMCCalls(driver, call, outcome, took)
}

// withOp sets op on an errs.Error that has none.
func withOp(err error, op string) error {
	if e, ok := err.(*errs.Error); ok && e.Op == "" {
		return e.WithOp(op)
	}
	return err
}
