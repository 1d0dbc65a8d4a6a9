package site

import (
	"context"
	"fmt"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// RegisterSteps registers the site and ramdisk steps of reg that Register
// does not already serve: a site step's Run as the activity named by its
// id, a ramdisk step as one more relayed kind. A site step with no Run
// that no activity of ours serves is an error naming it, before the
// worker starts.
func (a *Activities) RegisterSteps(r worker.ActivityRegistry, reg *sdk.Registry) error {
	for _, s := range reg.Steps() {
		switch {
		case a.serves(s.ID):
		case s.RunsOn == sdk.Ramdisk:
			r.RegisterActivityWithOptions(a.RelayCommand, activity.RegisterOptions{Name: s.ID})
		case s.RunsOn != sdk.Site:
		case s.Run == nil:
			return fmt.Errorf("site step %s has no Run and no activity of bcd site serves it: its plugin must give one", s.ID)
		default:
			r.RegisterActivityWithOptions(StepActivity(s), activity.RegisterOptions{Name: s.ID})
		}
	}
	return nil
}

// serves reports whether Register registers the kind.
func (a *Activities) serves(kind string) bool {
	if slices.Contains(kinds.RamdiskKinds(), kind) {
		return true
	}
	for _, n := range a.named() {
		if n.name == kind {
			return true
		}
	}
	return false
}

// StepActivity wraps a plugin's site step: its input is its with values
// plus the node's BMC target under "bmc" (the sdk package's contract), its
// Context the node as far as the site knows it and the run; From, SQL,
// PKI and Artifacts are the control plane's, nil here (a site step reads an
// earlier step's outputs through fromStep).
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
		return steps.Run(ctx, s, c, in)
	}
}
