package ipmi

import (
	"context"

	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// step is one Chassis Control request and the power state it leads to.
type step struct {
	ctl  chassis.ChassisControl
	want bmc.PowerState
}

// controlNames names Chassis Control requests in logs and errors.
var controlNames = map[chassis.ChassisControl]string{
	chassis.ChassisControlPowerDown:           "power down",
	chassis.ChassisControlPowerUp:             "power up",
	chassis.ChassisControlPowerCycle:          "power cycle",
	chassis.ChassisControlHardReset:           "hard reset",
	chassis.ChassisControlDiagnosticInterrupt: "pulse diagnostic interrupt (NMI)",
	chassis.ChassisControlSoftShutdown:        "soft shutdown (ACPI)",
}

// unsupported says, before anything is sent, which actions IPMI has no
// Chassis Control for.
func unsupported(action bmc.PowerAction) *errs.Error {
	if action == bmc.PowerGracefulRestart {
		return errs.New(errs.Unsupported, "IPMI has no graceful restart for power action %q (Chassis Control offers power down, up, cycle, "+
			"hard reset, NMI and soft shutdown): use reset, or graceful-off then on", action)
	}
	return nil
}

// plan returns the Chassis Control steps that perform action on a machine
// that is on or off. cycle is power down then power up, each confirmed:
// IPMI's own power cycle cannot be confirmed (the status reads on before
// and after it), and BMCs differ on cycling a machine that is off.
func plan(action bmc.PowerAction, on bool) ([]step, error) {
	up := []step{{chassis.ChassisControlPowerUp, bmc.On}}
	switch {
	case action == bmc.PowerGracefulRestart:
		return nil, unsupported(action)
	case action == bmc.PowerOn && on, action == bmc.PowerOff && !on, action == bmc.PowerGracefulOff && !on:
		return nil, nil
	case action == bmc.PowerOn:
		return up, nil
	case action == bmc.PowerOff:
		return []step{{chassis.ChassisControlPowerDown, bmc.Off}}, nil
	case action == bmc.PowerGracefulOff:
		return []step{{chassis.ChassisControlSoftShutdown, bmc.Off}}, nil
	case action == bmc.PowerNMI && !on:
		return nil, errs.New(errs.InvalidState, "the machine is off: an NMI needs it on")
	case action == bmc.PowerNMI:
		return []step{{chassis.ChassisControlDiagnosticInterrupt, bmc.On}}, nil
	case !on: // reset and cycle of a machine that is off
		return up, nil
	case action == bmc.PowerReset:
		return []step{{chassis.ChassisControlHardReset, bmc.On}}, nil
	case action == bmc.PowerCycle:
		return []step{{chassis.ChassisControlPowerDown, bmc.Off}, {chassis.ChassisControlPowerUp, bmc.On}}, nil
	}
	return nil, errs.Invalid("action", "unknown power action %q", action)
}

// SetPower performs action with Chassis Control and returns once Get
// Chassis Status reports the state each step asked for (bmc.Power).
// graceful-restart is UNSUPPORTED before any session opens.
func (d *Driver) SetPower(ctx context.Context, action bmc.PowerAction) (bmc.PowerResult, error) {
	const op = "power.setPower"
	if _, err := bmc.ParsePowerAction(string(action)); err != nil {
		return bmc.PowerResult{}, err
	}
	if err := unsupported(action); err != nil {
		return bmc.PowerResult{}, err.WithOp(op)
	}
	s, ctx, err := d.open(ctx, op, d.timeout+d.confirm.Timeout)
	if err != nil {
		return bmc.PowerResult{}, err
	}
	defer s.close()
	t := d.confirm.Track(d.host(), func(ctx context.Context) (bmc.PowerState, error) { return d.readPower(ctx, s, op) })
	st, err := t.Settled(ctx)
	if err != nil {
		return t.Result(), d.fail(op, err)
	}
	steps, err := plan(action, st == bmc.On)
	if err != nil {
		return t.Result(), d.fail(op, err)
	}
	for _, p := range steps {
		d.log.Info("ipmi chassis control", "action", string(action), "control", controlNames[p.ctl])
		if _, err := s.c.ChassisControl(ctx, p.ctl); err != nil {
			return t.Result(), d.refused(op, action, p.ctl, err)
		}
		if err := t.Await(ctx, p.want, "Chassis Control "+controlNames[p.ctl]); err != nil {
			return t.Result(), d.fail(op, err)
		}
	}
	res := t.Result()
	d.log.Info("ipmi power confirmed", "action", string(action), "state", string(res.State), "took", res.Took, "reads", res.Reads)
	return res, nil
}

// refused explains a Chassis Control the BMC did not accept: a BMC without
// the control (invalid command, invalid data field, not in this state) makes
// the action UNSUPPORTED.
func (d *Driver) refused(op string, action bmc.PowerAction, ctl chassis.ChassisControl, err error) error {
	if cc, ok := completionCode(err); ok {
		switch cc {
		case types.CodeInvalidCommand, types.CodeRequestDataFieldInvalid, types.CodeNotSupported:
			return errs.Wrap(errs.Unsupported, flat{err}, "BMC %s does not allow power action %q (Chassis Control %s): it answered completion code %s",
				d.host(), action, controlNames[ctl], ccName(cc)).WithOp(op)
		}
	}
	return d.fail(op, err)
}

// readPower reads Get Chassis Status's power bit.
func (d *Driver) readPower(ctx context.Context, s *session, op string) (bmc.PowerState, error) {
	st, err := s.c.GetChassisStatus(ctx)
	if err != nil {
		return "", d.fail(op, err)
	}
	if st.PowerIsOn {
		return bmc.On, nil
	}
	return bmc.Off, nil
}

// PowerState reads the machine's power from Get Chassis Status.
func (d *Driver) PowerState(ctx context.Context) (bmc.PowerState, error) {
	const op = "power.state"
	s, ctx, err := d.open(ctx, op, d.timeout)
	if err != nil {
		return "", err
	}
	defer s.close()
	return d.readPower(ctx, s, op)
}
