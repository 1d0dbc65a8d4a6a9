package bare

import (
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/errs"
)

// localActivityMarker is the marker the Go SDK records for a local activity.
const localActivityMarker = "LocalActivity"

// FlowOf reads from a workflow's history the flow it ran: its search
// attributes, and each scheduled activity, Home on homeQueue and Away on
// any other, with its options, and each local activity marker as Local.
// Retries of an activity are attempts of one step.
func FlowOf(history []*historypb.HistoryEvent, homeQueue string) (Flow, error) {
	var f Flow
	for _, ev := range history {
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			sa, err := typedSearchAttributes(a.GetSearchAttributes())
			if err != nil {
				return f, err
			}
			f.SearchAttributes = sa
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			f.Plan = append(f.Plan, stepOf(a, homeQueue))
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == localActivityMarker {
			f.Plan = append(f.Plan, Step{Kind: Local})
		}
	}
	return f, nil
}

// stepOf is a scheduled activity as a step: where it ran and its options.
func stepOf(a *historypb.ActivityTaskScheduledEventAttributes, homeQueue string) Step {
	s := Step{Kind: Away, StartToClose: a.GetStartToCloseTimeout().AsDuration(), Heartbeat: a.GetHeartbeatTimeout().AsDuration()}
	if a.GetTaskQueue().GetName() == homeQueue {
		s.Kind = Home
	}
	if rp := a.GetRetryPolicy(); rp != nil {
		s.Retry = &temporal.RetryPolicy{InitialInterval: rp.GetInitialInterval().AsDuration(),
			BackoffCoefficient: rp.GetBackoffCoefficient(), MaximumInterval: rp.GetMaximumInterval().AsDuration(),
			MaximumAttempts: rp.GetMaximumAttempts(), NonRetryableErrorTypes: rp.GetNonRetryableErrorTypes()}
	}
	return s
}

// typedSearchAttributes turns the search attributes of a started event back
// into the SDK's typed values, by the type the SDK wrote on each.
func typedSearchAttributes(sa *commonpb.SearchAttributes) (temporal.SearchAttributes, error) {
	var updates []temporal.SearchAttributeUpdate
	dc := converter.GetDefaultDataConverter()
	for name, p := range sa.GetIndexedFields() {
		var err error
		switch typ := string(p.GetMetadata()["type"]); typ {
		case "Keyword":
			var v string
			err = dc.FromPayload(p, &v)
			updates = append(updates, temporal.NewSearchAttributeKeyKeyword(name).ValueSet(v))
		case "Int":
			var v int64
			err = dc.FromPayload(p, &v)
			updates = append(updates, temporal.NewSearchAttributeKeyInt64(name).ValueSet(v))
		default:
			// better-compute sets keywords and ints only (api/metal.go)
			return temporal.SearchAttributes{}, errs.New(errs.Unsupported, "search attribute %s has type %q; the baseline copies Keyword and Int", name, typ)
		}
		if err != nil {
			return temporal.SearchAttributes{}, errs.Wrap(errs.InvalidInput, err, "search attribute %s", name)
		}
	}
	return temporal.NewSearchAttributes(updates...), nil
}

// Values returns sa's values by name, to compare flows.
func Values(sa temporal.SearchAttributes) map[string]any {
	m := map[string]any{}
	for k, v := range sa.GetUntypedValues() {
		m[k.GetName()] = v
	}
	return m
}

// Timing is where a workflow's time went, read from its history.
type Timing struct {
	Wall time.Duration // from started to closed
	// InActivities is how long its regular activities ran, from started to
	// completed, failed or timed out (of a retried activity, the last
	// attempt), and ActivityWait how long they waited for a worker, from
	// scheduled to started (of a retried one, with its backoff).
	InActivities, ActivityWait time.Duration
	// InTasks is how long its workflow tasks ran, from started to
	// completed: the workflow's code and its local activities; TaskWait
	// how long they waited for a worker, from scheduled to started.
	InTasks, TaskWait time.Duration
	// FirstTaskWait is the first workflow task's part of TaskWait: it waits
	// on the task queue for any of the workers' pollers, where the later
	// ones go to the worker that ran the first (its sticky queue).
	FirstTaskWait time.Duration
	// ByType splits InActivities by activity type.
	ByType map[string]Running
}

// Running is how many activities of a type ran to an end and for how long
// in all (of a retried one, its last attempt).
type Running struct {
	N    int
	Took time.Duration
}

// Add adds o's durations to t's.
func (t *Timing) Add(o Timing) {
	t.Wall += o.Wall
	t.InActivities += o.InActivities
	t.ActivityWait += o.ActivityWait
	t.InTasks += o.InTasks
	t.TaskWait += o.TaskWait
	t.FirstTaskWait += o.FirstTaskWait
	for typ, r := range o.ByType {
		t.ran(typ, r)
	}
}

func (t *Timing) ran(typ string, r Running) {
	if t.ByType == nil {
		t.ByType = map[string]Running{}
	}
	sum := t.ByType[typ]
	t.ByType[typ] = Running{N: sum.N + r.N, Took: sum.Took + r.Took}
}

// Times reads from a workflow's history where its time went (Timing).
func Times(history []*historypb.HistoryEvent) Timing {
	var t Timing
	if len(history) == 0 {
		return t
	}
	at := map[int64]time.Time{}
	// An activity's type, by its scheduled and its started event id.
	typeOf := map[int64]string{}
	since := func(id int64, ev *historypb.HistoryEvent) time.Duration { // 0 for id 0
		if s, ok := at[id]; ok && id != 0 {
			return ev.GetEventTime().AsTime().Sub(s)
		}
		return 0
	}
	sawTask := false
	for _, ev := range history {
		at[ev.GetEventId()] = ev.GetEventTime().AsTime()
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			typeOf[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			typeOf[ev.GetEventId()] = typeOf[a.GetScheduledEventId()]
		}
		// The getters of the attributes an event does not have answer 0.
		t.ActivityWait += since(ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId(), ev)
		started := max(ev.GetActivityTaskCompletedEventAttributes().GetStartedEventId(),
			ev.GetActivityTaskFailedEventAttributes().GetStartedEventId(),
			ev.GetActivityTaskTimedOutEventAttributes().GetStartedEventId())
		if started != 0 {
			ran := since(started, ev)
			t.InActivities += ran
			t.ran(typeOf[started], Running{N: 1, Took: ran})
		}
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			wait := since(a.GetScheduledEventId(), ev)
			if !sawTask {
				sawTask, t.FirstTaskWait = true, wait
			}
			t.TaskWait += wait
		}
		t.InTasks += since(max(ev.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId(),
			ev.GetWorkflowTaskFailedEventAttributes().GetStartedEventId(),
			ev.GetWorkflowTaskTimedOutEventAttributes().GetStartedEventId()), ev)
	}
	t.Wall = history[len(history)-1].GetEventTime().AsTime().Sub(history[0].GetEventTime().AsTime())
	return t
}
