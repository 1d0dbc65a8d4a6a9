package site

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// AttemptsClient reports command retries to the control plane over the
// site agent's mTLS client.
type AttemptsClient struct {
	c bettercomputev1connect.AgentCommandsServiceClient
}

// NewAttemptsClient returns a client of the control plane's agents listener.
func NewAttemptsClient(httpClient *http.Client, baseURL string) *AttemptsClient {
	return &AttemptsClient{c: bettercomputev1connect.NewAgentCommandsServiceClient(httpClient, baseURL)}
}

// ReportAttempt records that step runs its attempt n.
func (a *AttemptsClient) ReportAttempt(ctx context.Context, workflowID, runID, step string, n int32) error {
	_, err := a.c.ReportAttempt(ctx, connect.NewRequest(&v1.ReportAttemptRequest{
		WorkflowId: workflowID, RunId: runID, Step: step, Attempt: n}))
	if err != nil {
		return FromConnect("agentCommands.reportAttempt", err)
	}
	return nil
}

// ReportBMCStatus tells the workflow run what the site says of its node's
// BMC ("" once it answers), for its BmcStatus search attribute.
func (a *AttemptsClient) ReportBMCStatus(ctx context.Context, workflowID, runID, status string) error {
	_, err := a.c.ReportBMCStatus(ctx, connect.NewRequest(&v1.ReportBMCStatusRequest{
		WorkflowId: workflowID, RunId: runID, Status: status}))
	if err != nil {
		return FromConnect("agentCommands.reportBMCStatus", err)
	}
	return nil
}
