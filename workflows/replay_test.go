package workflows_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/worker"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestReplay replays the histories of a real enroll, deploy and undeploy
// (recorded from the demo by record_test.go, payloads decrypted, tokens
// redacted) against today's workflow code, registered as the control
// plane's worker registers it. A change that reorders or adds commands
// fails here with a nondeterminism error (TMPRL1100): version it with
// workflow.GetVersion, or re-record if no run of the old code can be open.
func TestReplay(t *testing.T) {
	cases := []struct {
		file, workflow string
		activities     int // scheduled, local activities aside
	}{
		{"enroll.json", wf.Enroll, 16},
		{"deploy.json", wf.Deploy, 15},
		{"undeploy.json", wf.Undeploy, 15},
	}
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			h, err := client.HistoryFromJSON(open(t, filepath.Join("testdata", tc.file)), client.HistoryJSONOptions{})
			if err != nil {
				t.Fatalf("HistoryFromJSON(%s) = %v", tc.file, err)
			}
			evs := h.GetEvents()
			typ := evs[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
			scheduled := 0
			for _, ev := range evs {
				if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
					scheduled++
				}
			}
			last := evs[len(evs)-1].GetEventType()
			if typ != tc.workflow || scheduled != tc.activities || last != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
				t.Fatalf("%s = %s with %d activities ending %v, want a completed %s with %d", tc.file, typ, scheduled, last,
					tc.workflow, tc.activities)
			}
			r := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistory(logger, h); err != nil {
				t.Errorf("ReplayWorkflowHistory(%s) = %v", tc.file, err)
			}
		})
	}
}

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
