package nodestate

import "github.com/better-compute/better-compute/errs"

// CheckRetry returns INVALID_STATE unless a failed node may move back to
// state to for `workflows retry --from-step`: the retried run's history
// has the node in to at that step (usually failedFrom), so the node goes
// back there before the run is reset. Only an active state: a retry never
// moves a node into a resting state (ready, deployed…), which only a run's
// own moves may do. It is not in the transitions table because it holds
// only for the state the retried run was in, which the API checks.
func CheckRetry(from, to State) error {
	if from == Failed && to.Active() {
		return nil
	}
	return errs.New(errs.InvalidState, "a retry moves a failed node back to an active state; this node is %s and the run was %s", from, to)
}
