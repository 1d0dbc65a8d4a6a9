package redfish

import (
	"context"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/stmcginnis/gofish/redfish"
)

// SetPower performs action through ComputerSystem.Reset and returns once
// the system reports the state each Reset asked for (bmc.Power). Safe to
// call twice: on, off and graceful-off do nothing when the machine is
// already there; reset, graceful-restart and cycle power on a machine that
// is off. cycle uses PowerCycle when the BMC allows it, else ForceOff,
// confirmed off, then On, confirmed on: an On sent while the off is still
// pending would be a no-op and leave the machine off.
func (d *Driver) SetPower(ctx context.Context, action bmc.PowerAction) (bmc.PowerResult, error) {
	const op = "power.setPower"
	if _, err := bmc.ParsePowerAction(string(action)); err != nil {
		return bmc.PowerResult{}, err
	}
	cn, sys, err := d.connectSystemFor(ctx, op, d.timeout+d.confirm.Timeout)
	if err != nil {
		return bmc.PowerResult{}, err
	}
	defer cn.close()
	fresh := sys // read just now, to find the system: its state is the first read's
	t := d.confirm.Track(d.addr.HostPort(), func(context.Context) (bmc.PowerState, error) {
		if s := fresh; s != nil {
			fresh = nil
			return d.powerOf(s, op)
		}
		return d.readPower(cn, sys.ODataID, op)
	})
	st, err := t.Settled(ctx)
	if err != nil {
		return t.Result(), d.fail(op, err)
	}
	steps, err := planReset(action, st == bmc.On, sys.SupportedResetTypes)
	if err != nil {
		return t.Result(), d.fail(op, err)
	}
	for _, rt := range steps {
		d.log.Info("redfish reset", "system", sys.ODataID, "action", string(action), "reset_type", string(rt))
		if err := sys.Reset(rt); err != nil {
			return t.Result(), d.fail(op, err)
		}
		if err := t.Await(ctx, after(rt), "Reset "+string(rt)); err != nil {
			return t.Result(), d.fail(op, err)
		}
	}
	res := t.Result()
	d.log.Info("redfish power confirmed", "system", sys.ODataID, "action", string(action), "state", string(res.State),
		"took", res.Took, "reads", res.Reads)
	return res, nil
}

// after is the power state a ResetType leaves the machine in.
func after(rt redfish.ResetType) bmc.PowerState {
	switch rt {
	case redfish.ForceOffResetType, redfish.GracefulShutdownResetType:
		return bmc.Off
	}
	return bmc.On // On, ForceOn, the restarts, PowerCycle and Nmi (which needs the machine on)
}

// readPower reads the system's PowerState afresh (powerOf).
func (d *Driver) readPower(cn *conn, path, op string) (bmc.PowerState, error) {
	sys, err := redfish.GetComputerSystem(cn.c, path)
	if err != nil {
		return "", d.fail(op, err)
	}
	return d.powerOf(sys, op)
}

// powerOf is sys's PowerState: On or Off, the Redfish word while it is in
// transition.
func (d *Driver) powerOf(sys *redfish.ComputerSystem, op string) (bmc.PowerState, error) {
	switch sys.PowerState {
	case redfish.PoweringOnPowerState, redfish.PoweringOffPowerState:
		return bmc.PowerState(sys.PowerState), nil
	}
	on, err := d.isOn(sys, op)
	if err != nil || !on {
		return bmc.Off, err
	}
	return bmc.On, nil
}

// PowerState reads the system's PowerState. A machine powering on, powering
// off or paused still counts as on.
func (d *Driver) PowerState(ctx context.Context) (bmc.PowerState, error) {
	const op = "power.state"
	cn, sys, err := d.connectSystem(ctx, op)
	if err != nil {
		return "", err
	}
	defer cn.close()
	on, err := d.isOn(sys, op)
	if err != nil {
		return "", err
	}
	if on {
		return bmc.On, nil
	}
	return bmc.Off, nil
}

func (d *Driver) isOn(sys *redfish.ComputerSystem, op string) (bool, error) {
	switch sys.PowerState {
	case redfish.OnPowerState, redfish.PoweringOnPowerState, redfish.PoweringOffPowerState, redfish.PausedPowerState:
		return true, nil
	case redfish.OffPowerState:
		return false, nil
	}
	return false, errs.New(errs.DriverError, "BMC %s reports PowerState %q for %s, which the Redfish driver does not know",
		d.addr.HostPort(), sys.PowerState, sys.ODataID).WithOp(op)
}

// planReset returns the ResetTypes that perform action on a machine that is on
// or off, given the ResetTypes the BMC allows (none listed means all).
func planReset(action bmc.PowerAction, on bool, allowed []redfish.ResetType) ([]redfish.ResetType, error) {
	pick := func(want ...redfish.ResetType) ([]redfish.ResetType, error) {
		for _, rt := range want {
			if len(allowed) == 0 || slices.Contains(allowed, rt) {
				return []redfish.ResetType{rt}, nil
			}
		}
		return nil, unsupported(action, want, allowed)
	}
	powerOn := func() ([]redfish.ResetType, error) { return pick(redfish.OnResetType, redfish.ForceOnResetType) }
	switch {
	case action == bmc.PowerOn && on, action == bmc.PowerOff && !on, action == bmc.PowerGracefulOff && !on:
		return nil, nil
	case action == bmc.PowerOn:
		return powerOn()
	case action == bmc.PowerOff:
		return pick(redfish.ForceOffResetType)
	case action == bmc.PowerGracefulOff:
		return pick(redfish.GracefulShutdownResetType)
	case action == bmc.PowerNMI && !on:
		return nil, errs.New(errs.InvalidState, "the machine is off: an NMI needs it on")
	case action == bmc.PowerNMI:
		return pick(redfish.NmiResetType)
	case !on: // reset, graceful-restart and cycle of a machine that is off
		return powerOn()
	case action == bmc.PowerReset:
		return pick(redfish.ForceRestartResetType)
	case action == bmc.PowerGracefulRestart:
		return pick(redfish.GracefulRestartResetType)
	case action == bmc.PowerCycle:
		if steps, err := pick(redfish.PowerCycleResetType); err == nil {
			return steps, nil
		}
		off, errOff := pick(redfish.ForceOffResetType)
		up, errOn := powerOn()
		if errOff != nil || errOn != nil {
			return nil, unsupported(action, []redfish.ResetType{redfish.PowerCycleResetType, redfish.ForceOffResetType, redfish.OnResetType}, allowed)
		}
		return append(off, up...), nil
	}
	return nil, errs.Invalid("action", "unknown power action %q", action)
}

func unsupported(action bmc.PowerAction, want, allowed []redfish.ResetType) error {
	return errs.New(errs.Unsupported, "the BMC does not allow power action %q: it needs Redfish ResetType %s, and the BMC allows only %s",
		action, joinTypes(want, " or "), joinTypes(allowed, ", "))
}

func joinTypes(ts []redfish.ResetType, sep string) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, sep)
}
