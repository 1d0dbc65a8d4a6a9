package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
)

// DeployWorkflow writes an OS onto a ready machine by running the deploy
// profile's plan, step by step, where each runs (plan.go). The plan's
// catalog images are pinned at the node's site before the node moves, so
// an image the site cannot fetch leaves the node ready (refused). deploy.image
// streams the catalog image from the site cache into the disk from the
// ramdisk (booted with its own discovery token), boot.kexec boots it, and
// plugin steps run on the control plane or at the site. The plan comes
// from profile.get's result, in history, so a replay runs the plan the run
// resolved whatever the worker registers now. The user data travels only
// as a reference.
func DeployWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Deploy, func(r *run) (*kinds.WipeAttestation, error) {
		var p kinds.Profile
		pin := kinds.ProfileInput{TenantID: in.TenantID, ProfileID: in.ProfileID, Version: in.ProfileVersion, Owner: in.ProfileTenant}
		if err := workflow.ExecuteActivity(r.cp(), kinds.ActGetProfile, pin).Get(r.ctx, &p); err != nil {
			return nil, err
		}
		d := deployer{run: r, from: map[string]sdk.Values{}, owner: p.Owner, pinned: map[string]pinned{}}
		plan, planErr := planOf(p)
		if r.refuses { // a run from before pinned each image as its step came
			if planErr == nil {
				planErr = d.pinPlanned(plan)
			}
			if planErr != nil {
				return nil, planErr
			}
		}
		if err := r.move(nodestate.Deploying); err != nil {
			return nil, err
		}
		if planErr != nil { // a run from before failed its plan deploying
			return nil, planErr
		}
		for _, s := range plan.Steps {
			if err := d.step(s); err != nil {
				return nil, err
			}
		}
		rec := kinds.DeploymentInput{TenantID: in.TenantID, NodeID: in.NodeID, ProfileID: p.ID, ProfileVersion: p.Version, Role: p.Role}
		if err := workflow.ExecuteActivity(r.cp(), kinds.ActRecordDeployment, rec).Get(r.ctx, nil); err != nil {
			return nil, err
		}
		return nil, r.move(nodestate.Deployed)
	})
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}
