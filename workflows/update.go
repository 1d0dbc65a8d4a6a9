package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/steps"
)

// UpdateBMC is metal.update's workflow type. It runs under the node's
// workflow id, so no verb runs beside it.
const UpdateBMC = "metal.update"

// UpdateBMCWorkflow checks a node's new BMC settings against the BMC
// itself (one bmc.inspect through the node's site: the address answers,
// the credentials log in, it is the same machine), then saves them. A
// refused login is final at once (UNAUTHENTICATED); nothing is saved unless
// the BMC answered.
func UpdateBMCWorkflow(ctx workflow.Context, in kinds.UpdateBMCInput) (kinds.InspectOutput, error) {
	site := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: kinds.SiteTaskQueue(in.SiteID), StartToCloseTimeout: steps.Timeout(kinds.BMCInspect),
		HeartbeatTimeout: heartbeatOf(kinds.BMCInspect),
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3,
			NonRetryableErrorTypes: errs.FinalKinds()},
	})
	var out kinds.InspectOutput
	if err := workflow.ExecuteActivity(site, kinds.BMCInspect, kinds.InspectInput{BMC: in.BMC}).Get(ctx, &out); err != nil {
		return out, err
	}
	if got := out.Inventory.ProductUUID; in.ProductUUID != "" && got != "" && got != in.ProductUUID {
		return out, errs.ToTemporal(errs.Invalid("bmc.address",
			"the BMC at %s reports product UUID %s, but node %s is the machine %s: that BMC is another machine's",
			in.BMC.Address, got, in.NodeID, in.ProductUUID))
	}
	return out, workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, cpOptions()), kinds.ActUpdateBMC, in).Get(ctx, nil)
}
