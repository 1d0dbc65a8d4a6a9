package bare

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// TestRunRecordsThePlan runs two workflows of one machine on a file-backed
// server and reads each plan back from its history.
func TestRunRecordsThePlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Cleanup(b.Stop)
	plans := []Plan{
		{Home, Local, Away, Local, Home},
		{Local, Away, Away, Local, Home, Home},
	}
	runs, err := b.Run(ctx, "m1", plans)
	if err != nil {
		t.Fatalf("Run(m1) = %v", err)
	}
	if len(runs) != len(plans) {
		t.Fatalf("Run(m1) = %d runs, want %d", len(runs), len(plans))
	}
	for i, runID := range runs {
		got := PlanOf(history(t, b, "bare/m1", runID), HomeQueue)
		if diff := cmp.Diff(plans[i], got); diff != "" {
			t.Errorf("PlanOf(run %d) (-want +got):\n%s", i, diff)
		}
	}
	if l, r := plans[1].Counts(); l != 2 || r != 4 {
		t.Errorf("Counts(%v) = %d local, %d regular; want 2, 4", plans[1], l, r)
	}
}

func history(t *testing.T, b *Baseline, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	iter := b.Client().GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	return events
}
