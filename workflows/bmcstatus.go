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
// The bmc-status-attribute change is asked at the first report, not when the
// run starts: a run whose BMC answers records no marker, so no
// TemporalChangeVersion upsert either (an event and a visibility write a
// run, which bare Temporal does not pay). A run from before the change
// (replayed, or relayed a report by an upgraded control plane) answers
// DefaultVersion there and ignores the reports; a history that recorded the
// marker first replays as well, as the SDK skips a version marker no code
// asks for where it stands and reads its version for the later ask.
func (r *run) watchBMCStatus() {
	ch := workflow.GetSignalChannel(r.ctx, BMCStatusSignal)
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		for {
			var s string
			ch.Receive(ctx, &s)
			r.setBMCStatus(s)
		}
	})
}

// tracksBMC reports whether this run keeps BmcStatus, asking Temporal the
// first time.
func (r *run) tracksBMC() bool {
	if !r.bmcAsked {
		r.bmcAsked = true
		r.bmcTracked = workflow.GetVersion(r.ctx, bmcStatusChange, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	}
	return r.bmcTracked
}

// setBMCStatus sets BmcStatus to s ("" unsets it) when it changes.
func (r *run) setBMCStatus(s string) {
	if s == r.bmcStatus || !r.tracksBMC() {
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
