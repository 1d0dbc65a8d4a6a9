package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/kinds"
)

// BMCStatusSignal carries what the site agent says of the node's BMC while
// a command waits on it ("BMC H unreachable since T: <last answer>", or ""
// when it answers again); the control plane relays it from the site.
const BMCStatusSignal = "bmc-status"

// bmcStatusChange is the workflow.GetVersion change id of BmcStatus.
const bmcStatusChange = "bmc-status-attribute"

// BMCStatusAttribute is the BmcStatus search attribute: set while the
// node's BMC is failing under this run, so `workflows list --query
// 'BmcStatus != ""'` and the Web UI show which runs wait on a dead BMC.
var BMCStatusAttribute = temporal.NewSearchAttributeKeyKeyword("BmcStatus")

// watchBMCStatus keeps BmcStatus from the site's reports for the whole run.
func (r *run) watchBMCStatus() {
	if workflow.GetVersion(r.ctx, bmcStatusChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	r.bmcTracked = true
	ch := workflow.GetSignalChannel(r.ctx, BMCStatusSignal)
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		for {
			var s string
			ch.Receive(ctx, &s)
			r.setBMCStatus(s)
		}
	})
}

// setBMCStatus sets BmcStatus to s ("" unsets it) when it changes.
func (r *run) setBMCStatus(s string) {
	if !r.bmcTracked || s == r.bmcStatus {
		return
	}
	upd := BMCStatusAttribute.ValueSet(s)
	if s == "" {
		upd = BMCStatusAttribute.ValueUnset()
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, upd); err != nil {
		workflow.GetLogger(r.ctx).Warn("cannot set BmcStatus", "node", r.in.NodeID, "err", err)
		return
	}
	r.bmcStatus = s
}

// isBMCKind reports whether a command of kind talks to the node's BMC.
func isBMCKind(kind string) bool {
	switch kind {
	case kinds.PowerSetPower, kinds.ManagementSetBootDevice, kinds.BMCInspect, kinds.MediaInsert, kinds.MediaEject:
		return true
	}
	return false
}
