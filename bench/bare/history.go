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

// Times reads from a workflow's history how long it ran, from started to
// closed, and how much of that its regular activities spent running (from
// started to completed, failed or timed out; of a retried activity, the last
// attempt). The rest is dispatch, workflow tasks and local activities.
func Times(history []*historypb.HistoryEvent) (wall, inActivities time.Duration) {
	if len(history) == 0 {
		return 0, 0
	}
	at := map[int64]time.Time{}
	for _, ev := range history {
		at[ev.GetEventId()] = ev.GetEventTime().AsTime()
		var started int64
		switch {
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			started = ev.GetActivityTaskCompletedEventAttributes().GetStartedEventId()
		case ev.GetActivityTaskFailedEventAttributes() != nil:
			started = ev.GetActivityTaskFailedEventAttributes().GetStartedEventId()
		case ev.GetActivityTaskTimedOutEventAttributes() != nil:
			started = ev.GetActivityTaskTimedOutEventAttributes().GetStartedEventId()
		}
		if t, ok := at[started]; ok && started != 0 {
			inActivities += ev.GetEventTime().AsTime().Sub(t)
		}
	}
	wall = history[len(history)-1].GetEventTime().AsTime().Sub(history[0].GetEventTime().AsTime())
	return wall, inActivities
}
