package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
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
