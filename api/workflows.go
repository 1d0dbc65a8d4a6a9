package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

type workflows struct{ *Server }

// maxWorkflows bounds one listing.
const maxWorkflows = 1000

func (s workflows) List(ctx context.Context, req *connect.Request[v1.ListWorkflowsRequest]) (*connect.Response[v1.ListWorkflowsResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	if err := s.needTemporal(); err != nil {
		return nil, err
	}
	query := fmt.Sprintf("TenantId = %s", quoteQuery(t))
	if n := req.Msg.NodeId; n != "" {
		if !ids.Valid(ids.Node, n) {
			return nil, errs.Invalid("nodeId", "want an id like node_01k5w…, got %s", quote(n))
		}
		query += fmt.Sprintf(" AND NodeId = %s", quoteQuery(n))
	}
	out := &v1.ListWorkflowsResponse{}
	var token []byte
	for {
		resp, err := s.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.namespace, Query: query, NextPageToken: token, PageSize: 200})
		if err != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "list workflows from Temporal")
		}
		for _, e := range resp.Executions {
			out.Items = append(out.Items, workflowOut(e))
		}
		token = resp.NextPageToken
		if len(token) == 0 || len(out.Items) >= maxWorkflows {
			break
		}
	}
	// Temporal's SQL visibility cannot ORDER BY: oldest first reads like a history.
	slices.SortFunc(out.Items, func(a, b *v1.Workflow) int { return a.StartTime.AsTime().Compare(b.StartTime.AsTime()) })
	return connect.NewResponse(out), nil
}

func (s workflows) Get(ctx context.Context, req *connect.Request[v1.GetWorkflowRequest]) (*connect.Response[v1.GetWorkflowResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	if err := s.needTemporal(); err != nil {
		return nil, err
	}
	if req.Msg.WorkflowId == "" {
		return nil, errs.Invalid("workflowId", "name the workflow")
	}
	d, err := s.temporal.DescribeWorkflowExecution(ctx, req.Msg.WorkflowId, req.Msg.RunId)
	notFound := errs.New(errs.NotFound, "workflow %s not found", quote(req.Msg.WorkflowId))
	if err != nil {
		var missing *serviceerror.NotFound
		if errors.As(err, &missing) {
			return nil, notFound
		}
		return nil, errs.Wrap(errs.Unavailable, err, "describe workflow")
	}
	w := workflowOut(d.WorkflowExecutionInfo)
	if w.TenantId != t {
		return nil, notFound
	}
	return connect.NewResponse(&v1.GetWorkflowResponse{Workflow: w}), nil
}

func workflowOut(e *workflowpb.WorkflowExecutionInfo) *v1.Workflow {
	w := &v1.Workflow{WorkflowId: e.GetExecution().GetWorkflowId(), RunId: e.GetExecution().GetRunId(),
		Type: e.GetType().GetName(), Status: strings.ToLower(strings.TrimPrefix(e.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")),
		StartTime: e.GetStartTime()}
	w.CloseTime = e.GetCloseTime()
	fields := e.GetSearchAttributes().GetIndexedFields()
	w.TenantId = attrString(fields, "TenantId")
	w.NodeId = attrString(fields, "NodeId")
	w.SiteId = attrString(fields, "SiteId")
	w.ProfileId = attrString(fields, "ProfileId")
	w.Verb = attrString(fields, "Verb")
	var v int64
	if p, ok := fields["ProfileVersion"]; ok {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &v)
	}
	w.ProfileVersion = v
	return w
}

func attrString(fields map[string]*commonpb.Payload, name string) string {
	p, ok := fields[name]
	if !ok {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

// quoteQuery quotes a value for a Temporal visibility query.
func quoteQuery(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// Retry resets a failed or stuck run of a node's workflow to just before a
// step (ResetWorkflowExecution to the workflow task that scheduled it): the
// steps before it keep their results from history and do not run again;
// it and those after run again, in a new run of the same workflow id.
// Everything is checked before anything moves: the step is in the run, the
// run failed or is stuck, the steps to run again are retry-safe (or
// --force). A failed node goes back, compare-and-set, to the state the run
// was in at the step, and back to failed if Temporal refuses the reset.
func (s workflows) Retry(ctx context.Context, req *connect.Request[v1.RetryWorkflowRequest]) (*connect.Response[v1.RetryWorkflowResponse], error) {
	m := req.Msg
	t, err := s.tenantOf(ctx, m.TenantId)
	if err != nil {
		return nil, err
	}
	if err := s.needTemporal(); err != nil {
		return nil, err
	}
	if m.WorkflowId == "" {
		return nil, errs.Invalid("workflowId", "name the workflow: `better-compute workflows list --node …` lists them")
	}
	if m.FromStep == "" || len(m.FromStep) > 200 {
		return nil, errs.Invalid("fromStep", "name the step to run again, by id (03.power.setPower) or kind")
	}
	ctx = codec.WithTenant(ctx, t)
	d, n, err := s.retryRun(ctx, t, m.WorkflowId, m.RunId)
	if err != nil {
		return nil, err
	}
	runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	list, err := s.runSteps(ctx, m.WorkflowId, runID)
	if err != nil {
		return nil, err
	}
	k, err := pickStep(list, m.FromStep, m.WorkflowId, runID)
	if err != nil {
		return nil, err
	}
	safety, err := s.retrySafety(ctx, t, n.SiteID)
	if err != nil {
		return nil, err
	}
	if bad := unsafeSteps(s.steps, list[k:], safety); len(bad) > 0 && !m.Force {
		return nil, errs.New(errs.InvalidState, "step %s is not retry-safe and would run again: running it twice may "+
			"leave the machine half-done; retry with --force to run it anyway", strings.Join(bad, ", "))
	}
	undo, err := s.nodeBack(ctx, n, list[k])
	if err != nil {
		return nil, err
	}
	reset, err := s.temporal.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: s.namespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: m.WorkflowId, RunId: runID},
		Reason:                    fmt.Sprintf("workflows retry --from-step %s", list[k].id),
		WorkflowTaskFinishEventId: list[k].resetTo,
		// Signals and cancel requests after the step are not replayed: an
		// aborted run's abort must not cancel the retry.
		ResetReapplyExcludeTypes: []enumspb.ResetReapplyExcludeType{enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL,
			enumspb.RESET_REAPPLY_EXCLUDE_TYPE_CANCEL_REQUEST},
	})
	if err != nil {
		undo()
		return nil, errs.Wrap(errs.Unavailable, err, "reset %s to before %s", m.WorkflowId, list[k].id)
	}
	s.abortPending(ctx, d, list[k].id, reset.GetRunId())
	return connect.NewResponse(s.retried(ctx, n, m.WorkflowId, runID, reset.GetRunId(), list, k)), nil
}

// retryRun returns the run to retry, which must be the workflow's newest,
// and its node; a workflow of another tenant is NOT_FOUND.
func (s workflows) retryRun(ctx context.Context, t, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, store.Node, error) {
	notFound := errs.New(errs.NotFound, "workflow %s not found", quote(id))
	newest, err := s.temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		var missing *serviceerror.NotFound
		if errors.As(err, &missing) {
			return nil, store.Node{}, notFound
		}
		return nil, store.Node{}, errs.Wrap(errs.Unavailable, err, "describe workflow")
	}
	w := workflowOut(newest.GetWorkflowExecutionInfo())
	if w.TenantId != t || w.NodeId == "" {
		return nil, store.Node{}, notFound
	}
	if runID != "" && runID != w.RunId {
		return nil, store.Node{}, errs.New(errs.InvalidState, "run %s is not the newest run of %s (%s is): only the newest can be retried",
			runID, id, w.RunId)
	}
	if err := checkRetryable(newest); err != nil {
		return nil, store.Node{}, err
	}
	n, err := s.store.GetNode(ctx, t, w.NodeId)
	return newest, n, err
}

// abortPending records the commands a stuck run had in flight as aborted:
// the reset terminated that run, which records nothing more, so they would
// show as sent forever. A failure is logged: the retry itself happened.
func (s workflows) abortPending(ctx context.Context, d *workflowservice.DescribeWorkflowExecutionResponse, step, newRun string) {
	e := d.GetWorkflowExecutionInfo().GetExecution()
	for _, pa := range d.GetPendingActivities() {
		msg := fmt.Sprintf("aborted: workflows retry --from-step %s reset the run; run %s runs it again", step, newRun)
		if _, err := s.store.FinishCommand(ctx, e.GetWorkflowId(), e.GetRunId(), pa.GetActivityId(), kinds.CommandAborted,
			int(pa.GetAttempt()), "", msg); err != nil {
			s.log.Error("retry: could not record a reset run's command as aborted", "workflow", e.GetWorkflowId(),
				"step", pa.GetActivityId(), "err", err)
		}
	}
}

// retried says what the retry did: the new run, the step, the steps kept.
func (s workflows) retried(ctx context.Context, n store.Node, id, oldRun, newRun string, list []runStep, k int) *v1.RetryWorkflowResponse {
	state := list[k].state // where nodeBack put it
	if state == "" {
		state = n.State
	}
	out := &v1.RetryWorkflowResponse{ResetRunId: oldRun, FromStep: list[k].id, NodeState: string(state),
		Workflow: &v1.Workflow{WorkflowId: id, RunId: newRun, TenantId: n.TenantID, NodeId: n.ID}}
	for _, st := range list[:k] {
		out.KeptSteps = append(out.KeptSteps, st.id)
	}
	if d, err := s.temporal.DescribeWorkflowExecution(ctx, id, newRun); err == nil {
		out.Workflow = workflowOut(d.GetWorkflowExecutionInfo())
	}
	return out
}
