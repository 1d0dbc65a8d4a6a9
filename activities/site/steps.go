package site

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// Register registers the site and ramdisk steps of reg (nil: the
// built-ins, steps.Registry()), each as the activity named by its id: a
// site step we serve ourselves (typed) as ours, any other site step as its
// Run, a ramdisk step as a relayed command (RelayCommand). A site step
// with no Run that no activity of ours serves is an error naming it,
// before the worker starts, as is a registry without one of our own.
func (a *Activities) Register(r worker.ActivityRegistry, reg *sdk.Registry) error {
	if reg == nil {
		var err error
		if reg, err = steps.Registry(); err != nil {
			return err
		}
	}
	typed := a.typed()
	for id := range typed {
		if s, ok := reg.Step(id); !ok || s.RunsOn != sdk.Site {
			return fmt.Errorf("the registry has no site step %s, which bcd site serves: build it with steps.Registry", id)
		}
	}
	for _, s := range reg.Steps() {
		switch {
		case s.RunsOn == sdk.Ramdisk:
			r.RegisterActivityWithOptions(a.RelayCommand, activity.RegisterOptions{Name: s.ID})
		case s.RunsOn != sdk.Site:
		case typed[s.ID] != nil:
			r.RegisterActivityWithOptions(typed[s.ID], activity.RegisterOptions{Name: s.ID})
		case s.Run == nil:
			return fmt.Errorf("site step %s has no Run and no activity of bcd site serves it: its plugin must give one", s.ID)
		default:
			r.RegisterActivityWithOptions(StepActivity(s), activity.RegisterOptions{Name: s.ID})
		}
	}
	return nil
}

// StepActivity wraps a plugin's site step, heartbeating while it runs: its
// input is its with values plus the node's BMC target under "bmc" (the sdk
// package's contract), its Context the node as far as the site knows it
// and the run; From, SQL, PKI and Artifacts are the control plane's, nil
// here (a site step reads an earlier step's outputs through fromStep).
func StepActivity(s sdk.Step) func(context.Context, sdk.Values) (sdk.Values, error) {
	return func(ctx context.Context, in sdk.Values) (sdk.Values, error) {
		var target struct {
			BMC kinds.BMCTarget `json:"bmc"`
		}
		if err := in.Decode(&target); err != nil {
			return nil, fmt.Errorf("%s: the bmc input: %w", s.ID, err)
		}
		info := activity.GetInfo(ctx)
		c := &sdk.Context{Node: sdk.Node{ID: target.BMC.NodeID, BMCDriver: target.BMC.Driver}, Step: info.ActivityID,
			WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID}
		// Heartbeats every 5 s while Run runs: the workflows give a
		// retry-safe site step a heartbeat timeout, so a site agent that
		// dies under it is found out in seconds, not at the step's timeout.
		last := &atomic.Pointer[kinds.Progress]{}
		last.Store(&kinds.Progress{})
		stop := heartbeatLoop(ctx, last)
		defer stop()
		return steps.Run(ctx, s, c, in)
	}
}
