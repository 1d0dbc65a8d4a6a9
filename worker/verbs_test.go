package worker

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// tally is a VerbObserver that remembers what it heard.
type tally struct {
	mu     sync.Mutex
	counts map[string]int // "verb outcome"
	took   []time.Duration
}

func (t *tally) VerbStarted(verb string) { t.add(verb + " started") }

func (t *tally) VerbEnded(verb string, err error, took time.Duration) {
	outcome := " finished"
	if err != nil {
		outcome = " failed"
	}
	t.add(verb + outcome)
	t.mu.Lock()
	t.took = append(t.took, took)
	t.mu.Unlock()
}

func (t *tally) add(k string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]int{}
	}
	t.counts[k]++
}

// TestVerbsCountsARun: a verb's workflow run for the first time is counted
// started, then finished or failed, with the workflow time it took.
func TestVerbsCountsARun(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{{"ok", nil, "metal.test finished"}, {"fails", errors.New("boom"), "metal.test failed"}} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			o := &tally{}
			env.SetWorkerOptions(sdkworker.Options{Interceptors: []interceptor.WorkerInterceptor{&verbs{o: o}}})
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				if err := workflow.Sleep(ctx, time.Minute); err != nil {
					return err
				}
				return tc.err
			}, workflow.RegisterOptions{Name: "metal.test"})
			env.ExecuteWorkflow("metal.test")
			want := map[string]int{"metal.test started": 1, tc.want: 1}
			if diff := cmp.Diff(want, o.counts); diff != "" {
				t.Errorf("counted (-want +got):\n%s", diff)
			}
			if len(o.took) != 1 || o.took[0] < time.Minute {
				t.Errorf("took = %v, want one duration of at least 1m (the workflow's sleep)", o.took)
			}
		})
	}
}

// TestVerbsReplayCountsNothing: replaying a finished verb's whole history,
// as a restarted worker or a query does, counts nothing again.
func TestVerbsReplayCountsNothing(t *testing.T) {
	o := &tally{}
	r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{
		Interceptors: []interceptor.WorkerInterceptor{&verbs{o: o}}})
	if err != nil {
		t.Fatal(err)
	}
	RegisterWorkflows(r)
	for _, file := range []string{"enroll.json", "deploy.json", "undeploy.json"} {
		f, err := os.Open(filepath.Join("..", "workflows", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		if err != nil {
			t.Fatalf("HistoryFromJSON(%s) = %v", file, err)
		}
		if err := r.ReplayWorkflowHistory(nil, h); err != nil {
			t.Fatalf("ReplayWorkflowHistory(%s) = %v", file, err)
		}
	}
	if len(o.counts) != 0 {
		t.Errorf("replays counted %v, want nothing", o.counts)
	}
}
