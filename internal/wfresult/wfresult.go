// Package wfresult waits for a workflow's result without trusting Temporal's
// long poll alone to end when the workflow closes.
//
// A client's result wait (client.WorkflowRun.Get) is one long poll on the
// workflow's close event, which the history service ends when a
// notification of the workflow's new events says it closed. That
// notification can be lost: in go.temporal.io/server v1.32.2 each waiter
// has a channel of one slot that the notifier fills without blocking
// (service/history/events/notifier.go), so when two of the workflow's
// transactions are announced before the waiter reads the first (the last
// workflow task started, then the close, on two busy cores), the close is
// dropped and the poll ends only at its expiry, 20 seconds later
// (history.longPollExpirationInterval), when the client polls again and
// finds the workflow closed. It happened to 2 of 300 workflows of a fleet
// benchmark at one machine. Get waits the same way and, beside the poll,
// describes the workflow after firstCheck and then at intervals doubling
// from there: a lost close costs at most about as long again as the wait
// had lasted, and a wait of a minute a handful of describes.
package wfresult

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Client is the part of client.Client that Get uses.
type Client interface {
	GetWorkflow(ctx context.Context, workflowID, runID string) client.WorkflowRun
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// firstCheck is how long Get waits before it first describes a workflow
// still running; each wait after doubles, up to lastCheck.
const (
	firstCheck = 500 * time.Millisecond
	lastCheck  = 16 * time.Second
)

// Get waits for the run's result as client.WorkflowRun.Get does, into
// valuePtr (nil: the result is not read), and returns what it returns: nil
// when the workflow completed, a *temporal.WorkflowExecutionError when it
// failed, was canceled, terminated or timed out, or the call's error. When
// a describe finds the workflow closed while the long poll still waits, the
// poll is ended and the result read again, which Temporal answers at once.
// A describe that fails is only a missed check: the poll goes on.
func Get(ctx context.Context, c Client, workflowID, runID string, valuePtr any) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	polled := make(chan error, 1)
	go func() { polled <- c.GetWorkflow(pctx, workflowID, runID).Get(pctx, valuePtr) }()
	for wait := firstCheck; ; wait = min(2*wait, lastCheck) {
		select {
		case err := <-polled:
			return err
		case <-time.After(wait):
		}
		d, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
		if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			cancel()
			if err := <-polled; err == nil || ctx.Err() != nil {
				return err // the poll answered after all (or the caller gave up)
			}
			return c.GetWorkflow(ctx, workflowID, runID).Get(ctx, valuePtr)
		}
	}
}
