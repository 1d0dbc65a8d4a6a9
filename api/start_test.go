package api_test

import (
	"context"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/better-compute/better-compute/internal/startid"
)

// lossy is a Temporal client whose first workflow start gets no answer in
// time (DEADLINE_EXCEEDED, as from a loaded cluster past the SDK's 10
// seconds, though the server may have started the run); it keeps each
// start's request id.
type lossy struct {
	running
	ids *[]string
}

func (l lossy) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	*l.ids = append(*l.ids, startid.Of(ctx))
	if len(*l.ids) == 1 {
		return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
	}
	return l.running.ExecuteWorkflow(ctx, opts, workflow, args...)
}

// TestVerbAsksAnUnansweredStartAgain: a verb whose workflow start got no
// answer in time asks again under the same request id (which Temporal
// answers with the run the first try started, if it did: the control
// plane's client sets it, TestStartsUnderOneIDAreOneRun) and answers the
// run, where it answered UNAVAILABLE though the node may be deploying.
func TestVerbAsksAnUnansweredStartAgain(t *testing.T) {
	t.Parallel()
	var query string
	var started, ids []string
	e := twoTenants(t, lossy{running: running{query: &query, started: &started}, ids: &ids})
	s := e.store
	e.ok(e.acme, profCreate, `{"profile":{"id":"cycle","version":1,"target":"metal","role":"host","steps":[{"use":"power.setPower","with":{"action":"cycle"}}]}}`)
	node := acmeNode(t, s)
	makeReady(t, s, node)
	out := e.ok(e.acme, deploy, `{"nodeId":"`+node+`","profile":"cycle","profileVersion":1}`)
	if out["runId"] != "run-1" || len(started) != 1 {
		t.Errorf("metal.deploy after an unanswered start = %v, workflows started %v; want run-1, one", out, started)
	}
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("the start's tries carried request ids %q; want two, the same", ids)
	}
}
