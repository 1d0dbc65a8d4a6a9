package wfresult

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// fakeTemporal is a workflow that closes at closeAt. Its first result poll
// lost the close when lost is set: it answers only when its context ends,
// as a poll does that waits out its expiry; every later poll answers as
// soon as the workflow is closed.
type fakeTemporal struct {
	closeAt   time.Time
	lost      bool
	polls     atomic.Int32
	describes atomic.Int32
}

func (f *fakeTemporal) closed() bool { return !time.Now().Before(f.closeAt) }

func (f *fakeTemporal) GetWorkflow(_ context.Context, id, runID string) client.WorkflowRun {
	return fakeRun{f}
}

func (f *fakeTemporal) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.describes.Add(1)
	status := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if f.closed() {
		status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: status}}, nil
}

type fakeRun struct{ f *fakeTemporal }

func (fakeRun) GetID() string                  { return "wf" }
func (fakeRun) GetRunID() string               { return "run" }
func (fakeRun) GetFirstExecutionRunID() string { return "run" }

func (r fakeRun) Get(ctx context.Context, valuePtr any) error {
	if r.f.polls.Add(1) == 1 && r.f.lost {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(r.f.closeAt)):
	}
	*valuePtr.(*string) = "done"
	return nil
}

func (r fakeRun) GetWithOptions(ctx context.Context, valuePtr any, _ client.WorkflowRunGetOptions) error {
	return r.Get(ctx, valuePtr)
}

// A result whose close Temporal announced comes from the long poll alone:
// nothing is described.
func TestResultFromThePoll(t *testing.T) {
	f := &fakeTemporal{closeAt: time.Now().Add(100 * time.Millisecond)}
	var got string
	if err := Get(context.Background(), f, "wf", "run", &got); err != nil || got != "done" {
		t.Fatalf("Get = %q, %v; want done, nil", got, err)
	}
	if n := f.describes.Load(); n != 0 {
		t.Errorf("described the workflow %d times, want 0", n)
	}
}

// A close the long poll missed is found by a describe, and the result read
// again: the wait does not last the poll's expiry (here: forever).
func TestResultOfALostClose(t *testing.T) {
	f := &fakeTemporal{closeAt: time.Now().Add(700 * time.Millisecond), lost: true}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got string
	if err := Get(ctx, f, "wf", "run", &got); err != nil || got != "done" {
		t.Fatalf("Get = %q, %v; want done, nil", got, err)
	}
	// Checks at 0.5 s (running) and 1.5 s (closed).
	if p, d := f.polls.Load(), f.describes.Load(); p != 2 || d != 2 {
		t.Errorf("polled %d and described %d times, want 2 and 2", p, d)
	}
}

// The caller's deadline ends the wait with its error.
func TestResultGivenUp(t *testing.T) {
	f := &fakeTemporal{closeAt: time.Now().Add(time.Hour), lost: true}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var got string
	if err := Get(ctx, f, "wf", "run", &got); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get = %v, want the deadline", err)
	}
}
