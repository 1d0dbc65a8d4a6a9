package api

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

// runStep is one step of a run as its history has it: an activity whose
// ActivityID is a step id (03.power.setPower, see workflows' run.step).
type runStep struct {
	id, kind, queue string
	scheduled       int64 // its ActivityTaskScheduled event
	// resetTo is the WorkflowTaskCompleted event whose task scheduled it:
	// a reset there runs that task again, so the step runs again and
	// everything before it comes from history.
	resetTo int64
	// state is the node's state when the step was scheduled ("" when the
	// run never moved the node).
	state nodestate.State
}

// stepIDPattern is a step id: the run's sequence number, a dot, the kind.
// Other activities (node.get, node.transition…) have Temporal's numeric ids.
var stepIDPattern = regexp.MustCompile(`^[0-9]+\.[a-z][a-zA-Z0-9]*(\.[a-zA-Z0-9]+)+$`)

// transitionIn is what the retry reads of a node.transition's input.
type transitionIn struct{ From, To nodestate.State }

// runSteps reads a run's steps from its history, each with the node's state
// when it was scheduled, decoded from the run's node.transition inputs.
func (s workflows) runSteps(ctx context.Context, id, runID string) ([]runStep, error) {
	it := s.temporal.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []runStep
	var state, first nodestate.State // the last move's target; the first move's source
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "read the history of %s", id)
		}
		a := e.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			continue
		}
		if a.GetActivityType().GetName() == kinds.ActTransition {
			t, err := s.transition(a)
			if err != nil {
				return nil, err
			}
			if first == "" {
				first = t.From
			}
			if t.To != nodestate.Failed {
				state = t.To
			}
			continue
		}
		if stepIDPattern.MatchString(a.GetActivityId()) {
			out = append(out, runStep{id: a.GetActivityId(), kind: a.GetActivityType().GetName(),
				queue: a.GetTaskQueue().GetName(), scheduled: e.GetEventId(), resetTo: a.GetWorkflowTaskCompletedEventId(),
				state: state})
		}
	}
	for i := range out { // steps before the first move ran in the state it moved from
		if out[i].state == "" {
			out[i].state = first
		}
	}
	return out, nil
}

func (s workflows) transition(a *historypb.ActivityTaskScheduledEventAttributes) (transitionIn, error) {
	var t transitionIn
	if s.dc == nil {
		return t, errs.New(errs.Unavailable, "this process cannot decode workflow payloads: no retry")
	}
	if err := s.dc.FromPayloads(a.GetInput(), &t); err != nil {
		return t, errs.Wrap(errs.Internal, err, "decode a node.transition input")
	}
	return t, nil
}

// pickStep finds the step named by id or by kind (when one step of the run
// has it): NOT_FOUND listing the run's steps, INVALID_INPUT when the kind
// ran more than once.
func pickStep(list []runStep, name, id, runID string) (int, error) {
	var ids, same []string
	for i, st := range list {
		if st.id == name {
			return i, nil
		}
		ids = append(ids, st.id)
		if st.kind == name {
			same = append(same, st.id)
		}
	}
	switch len(same) {
	case 0:
		return 0, errs.New(errs.NotFound, "step %s is not in run %s of %s; its steps: %s", quote(name), runID, id,
			listOrNone(ids))
	case 1:
		return slices.IndexFunc(list, func(st runStep) bool { return st.id == same[0] }), nil
	}
	return 0, errs.Invalid("fromStep", "%s ran %d times in run %s (%s): name one by its id", name, len(same), runID,
		strings.Join(same, ", "))
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// unsafeSteps lists the steps of list that would run again and are not
// retry-safe. What a step declared comes from reg, the API's own steps
// (built-ins, the lifecycle's own commands among them, and its plugins),
// else from what the workers published (safety, see retrySafety). A
// control-plane step known to neither is a plugin's this process cannot
// see: it counts as unsafe, so --force is needed. A site or ramdisk step
// known to neither is a plugin's of a site agent that announced nothing
// (one from before steps were published), taken as safe as it was then.
func unsafeSteps(reg *sdk.Registry, list []runStep, safety map[string]bool) []string {
	var out []string
	for _, st := range list {
		cp := st.queue == wf.ControlPlaneQueue
		safe, known := safety[safetyKey(cp, st.kind)]
		if own, ok := reg.Step(st.kind); ok {
			safe, known = own.RetrySafe, true
		}
		if !known {
			safe = !cp
		}
		if !safe {
			out = append(out, st.id)
		}
	}
	return out
}

func safetyKey(controlPlane bool, step string) string {
	if controlPlane {
		return "control-plane/" + step
	}
	return "site/" + step
}

// retrySafety reads whether each step the control plane's worker and the
// node's site published is retry-safe, by safetyKey.
func (s workflows) retrySafety(ctx context.Context, tenant, site string) (map[string]bool, error) {
	published, err := s.store.PublishedSteps(ctx, []string{tenant})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range published {
		if p.SiteID != "" && p.SiteID != site {
			continue
		}
		st, err := sdk.DecodeDescriptor(p.Descriptor)
		if err != nil { // would not register: unknown, so unsafe if it ran on the control plane
			continue
		}
		out[safetyKey(p.SiteID == "", st.ID)] = st.RetrySafe
	}
	return out, nil
}

// checkRetryable refuses a run that is not failed or stuck: one still
// running with no activity failing, or one that completed.
func checkRetryable(d *workflowservice.DescribeWorkflowExecutionResponse) error {
	info := d.GetWorkflowExecutionInfo()
	run := fmt.Sprintf("run %s of %s", info.GetExecution().GetRunId(), info.GetExecution().GetWorkflowId())
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if slices.ContainsFunc(d.GetPendingActivities(), stuck) {
			return nil
		}
		return errs.New(errs.InvalidState, "%s (%s) is running and none of its steps is failing: nothing to retry; "+
			"`better-compute commands list --node …` shows what it does", run, info.GetType().GetName())
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return errs.New(errs.InvalidState, "%s (%s) completed: nothing to retry", run, info.GetType().GetName())
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return errs.New(errs.InvalidState, "%s continued as a new run: retry that one", run)
	}
	return nil // failed, cancelled (metal.abort), terminated or timed out
}

// stuck: a pending activity whose last attempt failed and is being
// retried. A step that said NotReady (wait.agentJoined polling) is
// retried too, but it is waiting as it should: not stuck.
func stuck(pa *workflowpb.PendingActivityInfo) bool {
	if pa.GetLastFailure().GetApplicationFailureInfo().GetType() == steps.NotReadyType {
		return false
	}
	return pa.GetAttempt() > 1 || pa.GetLastFailure() != nil
}

// nodeBack moves node n to where the run was at the step (the state its
// history has it in there), compare-and-set from failed, and returns the
// undo; nothing when the node is already there. Any other state is
// INVALID_STATE and nothing moves.
func (s workflows) nodeBack(ctx context.Context, n store.Node, st runStep) (undo func(), err error) {
	to := st.state
	if to == "" || to == n.State {
		return func() {}, nil
	}
	if n.State != nodestate.Failed {
		return nil, errs.New(errs.InvalidState, "node %s is %s, but its run was %s at step %s: retry from a step the run "+
			"took in %s, or recover the node", n.ID, n.State, to, st.id, n.State)
	}
	if err := nodestate.CheckRetry(n.State, to); err != nil {
		return nil, errs.New(errs.InvalidState, "node %s: its run was %s at step %s, a state a retry cannot move it "+
			"back to: retry from a later step", n.ID, to, st.id)
	}
	if err := s.store.Unfail(ctx, n.TenantID, n.ID, to); err != nil {
		return nil, err
	}
	return func() {
		if err := s.store.Refail(context.WithoutCancel(ctx), n.TenantID, n.ID, to, n.FailedFrom, n.LastError); err != nil {
			s.log.Error("retry: could not put the node back to failed", "node", n.ID, "err", err)
		}
	}, nil
}
