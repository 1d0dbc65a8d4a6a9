package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
)

// AbortSignal carries metal.abort's reason to the running workflow just
// before the API cancels it.
const AbortSignal = "abort"

// verb runs body as the workflow of verb v: it loads the node, checks the
// verb may start from its state, and on any error moves the node to failed
// from the active state it was in.
func verb(ctx workflow.Context, in Input, v nodestate.Verb, body func(r *run) (*kinds.WipeAttestation, error)) (res Result, err error) {
	r, err := newRun(ctx, in)
	if err != nil {
		return Result{}, err
	}
	if err := CheckVerb(v, r.state); err != nil {
		return Result{}, errs.ToTemporal(err)
	}
	defer func() {
		if err != nil {
			cause := r.abortReason(err)
			if temporal.IsCanceledError(err) {
				cause = r.leaveSafe(cause)
			}
			if r.state.Active() {
				r.fail(cause)
			} else {
				r.refused(v, cause)
			}
			res.State = r.state
		}
	}()
	att, err := body(r)
	if rerr := r.flush(); err == nil {
		err = rerr
	}
	return Result{State: r.state, Attestation: att}, errs.ToTemporal(err)
}

// abortReason prefers the reason metal.abort sent over the bare cancellation.
func (r *run) abortReason(err error) error {
	var reason string
	if workflow.GetSignalChannel(r.ctx, AbortSignal).ReceiveAsync(&reason) && reason != "" {
		return fmt.Errorf("aborted: %s", reason)
	}
	return err
}

// abortLeavesSafe is the workflow.GetVersion change id of leaveSafe:
// histories of aborts from before it replay without its commands.
const abortLeavesSafe = "abort-leaves-machine-safe"

// leaveSafe runs after metal.abort cancelled the verb, before the node
// moves to failed: the machine is powered off, its ramdisk boot entry
// removed and its next boot set back to disk, so an aborted machine does
// not keep running or PXE-boot our ramdisk later. Each command is recorded
// as usual and tried even when one before failed; a failure is named in
// the node's error, and the node still moves to failed.
func (r *run) leaveSafe(cause error) error {
	dctx, cancel := workflow.NewDisconnectedContext(r.ctx)
	defer cancel()
	if workflow.GetVersion(dctx, abortLeavesSafe, workflow.DefaultVersion, 1) == workflow.DefaultVersion || !r.state.Active() {
		return cause
	}
	ctx := r.ctx
	r.ctx, r.aborting = dctx, true
	defer func() { r.ctx, r.aborting = ctx, false }()
	steps := []struct {
		what string
		do   func() error
	}{
		{"power it off", func() error { return r.power(bmc.PowerOff) }},
		{"remove its boot entry", func() error {
			_, err := r.send(kinds.BootClearEntry, kinds.ClearEntryInput{NodeID: r.in.NodeID}, nil)
			return err
		}},
		{"set its next boot to disk", func() error { return r.bootDevice(bmc.BootDisk, false) }},
	}
	for _, s := range steps { // each is tried: a dead BMC must not keep the boot entry
		if err := s.do(); err != nil {
			cause = fmt.Errorf("%w; could not %s: %s", cause, s.what, lastError(err))
		}
	}
	return cause
}

// EnrollWorkflow: the BMC is checked and inspected, the ramdisk reports the
// machine's disks, every disk is wiped and the wipe attested: then ready.
func EnrollWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Enroll, func(r *run) (*kinds.WipeAttestation, error) {
		if err := r.inspectBMC(); err != nil {
			return nil, err
		}
		if err := r.move(nodestate.Inspecting); err != nil {
			return nil, err
		}
		if r.node.Agent == kinds.AgentNone { // out-of-band only: commissioning just powers off
			if err := r.power(bmc.PowerOff); err != nil {
				return nil, err
			}
			return nil, r.readyWithout(kinds.ExceptionAgentNone)
		}
		if err := r.startRamdisk(); err != nil {
			return nil, err
		}
		if err := r.move(nodestate.Cleaning); err != nil {
			return nil, err
		}
		return r.commission()
	})
}

// commission is the way into ready: the ramdisk is up and has reported
// the disks; every disk is wiped with quick and the wipe proven, then the
// machine powers off.
func (r *run) commission() (*kinds.WipeAttestation, error) {
	att, err := r.wipe("quick", "")
	if err != nil {
		return nil, err
	}
	if err := r.shutDown(); err != nil {
		return nil, err
	}
	return att, r.move(nodestate.Ready)
}

// ManageWorkflow holds a node out of service: powered off, manageable.
func ManageWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Manage, func(r *run) (*kinds.WipeAttestation, error) {
		if err := r.power(bmc.PowerOff); err != nil {
			return nil, err
		}
		return nil, r.move(nodestate.Manageable)
	})
}

// InspectWorkflow reads the BMC and the ramdisk's inventory again. From
// manageable it ends in manageable. From ready it ends in ready the only way
// into ready there is: the ramdisk that read the inventory wipes every disk
// and the wipe is attested (cleaning), since the machine ran code of ours
// that the next tenant must not inherit. An agentless pool's machine only
// has its BMC read, and is ready again under its pool's agentNone exception.
func InspectWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Inspect, func(r *run) (*kinds.WipeAttestation, error) {
		back := r.state
		if err := r.move(nodestate.Inspecting); err != nil {
			return nil, err
		}
		if err := r.inspectBMC(); err != nil {
			return nil, err
		}
		switch {
		case r.node.Agent == kinds.AgentNone && back == nodestate.Ready:
			return nil, r.readyWithout(kinds.ExceptionAgentNone)
		case r.node.Agent == kinds.AgentNone:
			return nil, r.move(back)
		}
		if err := r.startRamdisk(); err != nil {
			return nil, err
		}
		if back == nodestate.Ready {
			if err := r.move(nodestate.Cleaning); err != nil {
				return nil, err
			}
			return r.commission()
		}
		if err := r.shutDown(); err != nil {
			return nil, err
		}
		return nil, r.move(back)
	})
}

// ProvideWorkflow returns a manageable node to ready through commissioning.
func ProvideWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Provide, commissionBody)
}

// RecoverWorkflow returns a failed node to ready through commissioning:
// whatever failed, its disks are wiped and the wipe attested again.
func RecoverWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Recover, commissionBody)
}

func commissionBody(r *run) (*kinds.WipeAttestation, error) {
	if err := r.needsRamdisk("commissioning"); err != nil {
		return nil, err
	}
	// A node that failed before its BMC told us its MACs (a wrong password
	// at enroll, fixed since) asks the BMC again before anything moves.
	if len(r.node.MACs) == 0 && workflow.GetVersion(r.ctx, noMACNodes, workflow.DefaultVersion, 1) == 1 {
		if err := r.inspectBMC(); err != nil {
			return nil, err
		}
	}
	if err := r.move(nodestate.Cleaning); err != nil {
		return nil, err
	}
	if err := r.startRamdisk(); err != nil {
		return nil, err
	}
	return r.commission()
}

// UndeployWorkflow takes a deployed machine back: it boots the ramdisk,
// wipes every disk in the asked mode, and is ready only after the control
// plane verified the machine's signed attestation for every disk.
func UndeployWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Undeploy, func(r *run) (*kinds.WipeAttestation, error) {
		unverified := in.Wipe == "none" || r.node.Agent == kinds.AgentNone
		if unverified && !r.node.AllowUnverifiedRelease { // checked before anything moves
			return nil, r.unverifiedRefused()
		}
		if err := r.move(nodestate.Releasing); err != nil {
			return nil, err
		}
		if _, err := r.send(kinds.BootClearEntry, kinds.ClearEntryInput{NodeID: r.in.NodeID}, nil); err != nil {
			return nil, err
		}
		if unverified {
			return nil, r.releaseUnverified()
		}
		if err := r.startRamdisk(); err != nil {
			return nil, err
		}
		att, err := r.wipe(in.Wipe, "")
		if err != nil {
			return nil, err
		}
		if err := r.shutDown(); err != nil {
			return nil, err
		}
		if err := r.clearDeployment(); err != nil {
			return nil, err
		}
		return att, r.move(nodestate.Ready)
	})
}

// releaseUnverified releases without an attested wipe, which only a pool
// with allowUnverifiedRelease permits; the store records the exception and
// its event (node.release.unverified).
func (r *run) releaseUnverified() error {
	if err := r.power(bmc.PowerOff); err != nil {
		return err
	}
	if err := r.clearDeployment(); err != nil {
		return err
	}
	workflow.GetLogger(r.ctx).Warn("node.release.unverified", "node", r.in.NodeID, "pool", r.node.PoolID)
	return r.readyWithout(kinds.ExceptionUnverifiedRelease)
}

// unverifiedRefused is a release without an attested wipe on a pool that
// does not allow one.
func (r *run) unverifiedRefused() error {
	return errs.New(errs.UnverifiedWipe, "release of %s has no attested wipe and pool %s does not set allowUnverifiedRelease",
		r.in.NodeID, r.node.PoolID)
}

func (r *run) clearDeployment() error {
	in := kinds.DeploymentInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID}
	return workflow.ExecuteActivity(r.cp(), kinds.ActRecordDeployment, in).Get(r.ctx, nil)
}

// RetireWorkflow crypto-erases (secure-erases a disk that has no
// cryptographic erase), powers off and revokes the machine's identity;
// retired is final.
func RetireWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Retire, func(r *run) (*kinds.WipeAttestation, error) {
		if err := r.move(nodestate.Retiring); err != nil {
			return nil, err
		}
		if len(r.node.MACs) == 0 && workflow.GetVersion(r.ctx, noMACNodes, workflow.DefaultVersion, 1) == 1 {
			return nil, r.retireUnbooted()
		}
		var att *kinds.WipeAttestation
		if r.node.Agent != kinds.AgentNone {
			if err := r.startRamdisk(); err != nil {
				return nil, err
			}
			var err error
			if att, err = r.wipe("crypto-erase", "secure-erase"); err != nil {
				return nil, err
			}
		}
		if err := r.shutDown(); err != nil {
			return nil, err
		}
		if err := r.revoke(); err != nil {
			return nil, err
		}
		return att, r.move(nodestate.Retired)
	})
}

// noMACNodes is the workflow.GetVersion change id of retire and recover for
// a node that never got a MAC.
const noMACNodes = "no-mac-nodes"

// retireUnbooted retires a node that never got a MAC: no ramdisk of ours
// ever booted on it (a boot entry needs a MAC), so nothing of ours is on
// its disks and there is nothing to wipe. It powers the machine off if its
// BMC lets it, clears any boot entry and revokes the node's identity; what
// it skipped is the retired node's lastError.
func (r *run) retireUnbooted() error {
	skipped := "retired without a wipe: the node never got a MAC, so no ramdisk of ours booted on it"
	if err := r.power(bmc.PowerOff); err != nil {
		skipped += "; not powered off: " + lastError(err)
	}
	if _, err := r.send(kinds.BootClearEntry, kinds.ClearEntryInput{NodeID: r.in.NodeID}, nil); err != nil {
		return err
	}
	if err := r.revoke(); err != nil {
		return err
	}
	workflow.GetLogger(r.ctx).Warn(skipped, "node", r.in.NodeID)
	in := kinds.TransitionInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, From: r.state, To: nodestate.Retired,
		WorkflowID: r.info.WorkflowExecution.ID, RunID: r.info.WorkflowExecution.RunID, Error: skipped}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActTransition, in).Get(r.ctx, nil); err != nil {
		return err
	}
	r.state = nodestate.Retired
	return nil
}

// revoke revokes the node's identity (its certificates and tokens).
func (r *run) revoke() error {
	ref := kinds.DeploymentInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID}
	return workflow.ExecuteActivity(r.cp(), kinds.ActRevokeIdentity, ref).Get(r.ctx, nil)
}

// RescueWorkflow boots a deployed machine into the ramdisk as a rescue
// environment.
func RescueWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.RescueV, func(r *run) (*kinds.WipeAttestation, error) {
		if err := r.move(nodestate.Rescuing); err != nil {
			return nil, err
		}
		if err := r.needsRamdisk("rescue"); err != nil {
			return nil, err
		}
		if err := r.startRamdisk(); err != nil {
			return nil, err
		}
		return nil, r.move(nodestate.Rescue)
	})
}

// UnrescueWorkflow boots a rescued machine back into its OS.
func UnrescueWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Unrescue, func(r *run) (*kinds.WipeAttestation, error) {
		if err := r.move(nodestate.Unrescuing); err != nil {
			return nil, err
		}
		if err := r.bootLocal(); err != nil {
			return nil, err
		}
		if err := r.power(bmc.PowerCycle); err != nil {
			return nil, err
		}
		return nil, r.move(nodestate.Deployed)
	})
}

// PowerWorkflow performs one power action; the state does not change.
func PowerWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Power, func(r *run) (*kinds.WipeAttestation, error) {
		action, err := bmc.ParsePowerAction(in.Action)
		if err != nil {
			return nil, err
		}
		return nil, r.power(action)
	})
}
