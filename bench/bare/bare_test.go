package bare

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
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
		h := history(t, b, "bare/m1", runID)
		got := PlanOf(h, HomeQueue)
		if diff := cmp.Diff(plans[i], got); diff != "" {
			t.Errorf("PlanOf(run %d) (-want +got):\n%s", i, diff)
		}
		// No-op activities run in next to no time of the workflow's.
		if wall, in := Times(h); wall <= 0 || in < 0 || in > wall/2 {
			t.Errorf("Times(run %d) = wall %v, in activities %v; want wall > 0 and under half of it in no-ops", i, wall, in)
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

func TestTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := func(id int64, after time.Duration, attrs func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
		e := &historypb.HistoryEvent{EventId: id, EventTime: timestamppb.New(t0.Add(after))}
		if attrs != nil {
			attrs(e)
		}
		return e
	}
	completed := func(started int64) func(*historypb.HistoryEvent) {
		return func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{
				ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{StartedEventId: started}}
		}
	}
	failed := func(started int64) func(*historypb.HistoryEvent) {
		return func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
				ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{StartedEventId: started}}
		}
	}
	for _, tc := range []struct {
		name         string
		history      []*historypb.HistoryEvent
		wall, inActs time.Duration
	}{
		{"empty", nil, 0, 0},
		{"no activities", []*historypb.HistoryEvent{ev(1, 0, nil), ev(2, time.Second, nil)}, time.Second, 0},
		{"two activities, one failed", []*historypb.HistoryEvent{
			ev(1, 0, nil), ev(5, time.Second, nil), ev(6, 2*time.Second, nil), ev(7, 5*time.Second, completed(6)),
			ev(11, 6*time.Second, nil), ev(12, 6*time.Second+500*time.Millisecond, failed(11)), ev(20, 10*time.Second, nil),
		}, 10 * time.Second, 3*time.Second + 500*time.Millisecond},
	} {
		wall, in := Times(tc.history)
		if wall != tc.wall || in != tc.inActs {
			t.Errorf("Times(%s) = %v, %v; want %v, %v", tc.name, wall, in, tc.wall, tc.inActs)
		}
	}
}
