// Package bare owns the fleet benchmark's baseline: bare Temporal on the same
// embedded server as the control plane's default (tserver, one SQLite file in
// a data directory), running workflows that do nothing but the same number
// and mix of activities as one of better-compute's: local activities,
// activities on the workflow's own task queue (the control plane's) and
// activities on another worker's queue (a site's), each a no-op. What a
// better-compute loop costs beyond this is better-compute's own.
package bare

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/tserver"
)

// Step is one activity of a plan.
type Step int

const (
	// Local is a local activity (better-compute's command records).
	Local Step = iota
	// Home is an activity on the workflow's own task queue (the control plane's).
	Home
	// Away is an activity on another worker's task queue (a site's).
	Away
)

func (s Step) String() string { return [...]string{"local", "home", "away"}[s] }

// Plan is the steps of one workflow, in order.
type Plan []Step

// Counts returns how many local and how many regular activities p runs.
func (p Plan) Counts() (local, regular int) {
	for _, s := range p {
		if s == Local {
			local++
		} else {
			regular++
		}
	}
	return local, regular
}

// localActivityMarker is the marker the Go SDK records for a local activity.
const localActivityMarker = "LocalActivity"

// PlanOf reads the plan a workflow ran from its history: each scheduled
// activity on homeQueue is Home, on any other queue Away, each local activity
// marker Local. Retries of an activity are attempts of one step.
func PlanOf(history []*historypb.HistoryEvent, homeQueue string) Plan {
	var p Plan
	for _, ev := range history {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			if a.GetTaskQueue().GetName() == homeQueue {
				p = append(p, Home)
			} else {
				p = append(p, Away)
			}
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == localActivityMarker {
			p = append(p, Local)
		}
	}
	return p
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

// Task queues of the baseline's two workers.
const (
	HomeQueue = "bare-home"
	AwayQueue = "bare-away"
)

// Baseline is a running embedded server with the baseline's two workers.
type Baseline struct {
	srv     *tserver.Server
	c       client.Client
	workers []worker.Worker
}

// Start starts an embedded server on dataDir/temporal.db without its UI, and
// a worker on each of the two queues.
func Start(ctx context.Context, dataDir string) (b *Baseline, err error) {
	started := &Baseline{}
	b = started
	defer func() {
		if err != nil {
			started.Stop() // b is nil by now
		}
	}()
	if b.srv, err = tserver.Start(ctx, tserver.Config{DataDir: dataDir, UIPort: -1}); err != nil {
		return nil, err
	}
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	if b.c, err = client.DialContext(ctx, client.Options{HostPort: b.srv.FrontendAddress(), Logger: quiet}); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "dial the baseline's Temporal server")
	}
	home := worker.New(b.c, HomeQueue, worker.Options{})
	home.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: "bare.loop"})
	home.RegisterActivityWithOptions(Noop, activity.RegisterOptions{Name: "bare.noop"})
	away := worker.New(b.c, AwayQueue, worker.Options{})
	away.RegisterActivityWithOptions(Noop, activity.RegisterOptions{Name: "bare.noop"})
	for _, w := range []worker.Worker{home, away} {
		if err := w.Start(); err != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "start a baseline worker")
		}
		b.workers = append(b.workers, w)
	}
	return b, nil
}

// Client is the baseline's Temporal client.
func (b *Baseline) Client() client.Client { return b.c }

// Stop stops the workers, the client and the server. Safe to call twice.
func (b *Baseline) Stop() {
	for _, w := range b.workers {
		w.Stop()
	}
	b.workers = nil
	if b.c != nil {
		b.c.Close()
		b.c = nil
	}
	if b.srv != nil {
		_ = b.srv.Stop()
		b.srv = nil
	}
}

// Run runs one loop of one machine: a workflow per plan, back to back, each
// started when the one before completed, all under the workflow id
// "bare/<machine>" as better-compute runs a node's verbs under one id. It
// returns the run ids.
func (b *Baseline) Run(ctx context.Context, machine string, plans []Plan) ([]string, error) {
	var runs []string
	for i, p := range plans {
		opts := client.StartWorkflowOptions{ID: "bare/" + machine, TaskQueue: HomeQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}
		run, err := b.c.ExecuteWorkflow(ctx, opts, "bare.loop", p)
		if err != nil {
			return runs, errs.Wrap(errs.Unavailable, err, "start workflow %d of %s", i, machine)
		}
		var out Result
		if err := run.Get(ctx, &out); err != nil {
			return runs, fmt.Errorf("workflow %d of %s: %w", i, machine, err)
		}
		if out.Steps != len(p) {
			return runs, errs.New(errs.Internal, "workflow %d of %s ran %d steps, want %d", i, machine, out.Steps, len(p))
		}
		runs = append(runs, run.GetRunID())
	}
	return runs, nil
}

// Result is what a baseline workflow returns.
type Result struct{ Steps int }

// In and Out are a no-op activity's small input and output.
type (
	In  struct{ Seq int }
	Out struct {
		Seq int
		OK  bool
	}
)

// Noop is every activity of the baseline: it returns at once.
func Noop(_ context.Context, in In) (Out, error) { return Out{Seq: in.Seq, OK: true}, nil }

// Workflow runs plan's steps in order, each waited for before the next.
func Workflow(ctx workflow.Context, plan Plan) (Result, error) {
	home := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: HomeQueue, StartToCloseTimeout: time.Minute})
	away := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: AwayQueue, StartToCloseTimeout: time.Minute})
	local := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	for i, s := range plan {
		var out Out
		var err error
		switch s {
		case Local:
			err = workflow.ExecuteLocalActivity(local, Noop, In{Seq: i}).Get(ctx, &out)
		case Home:
			err = workflow.ExecuteActivity(home, "bare.noop", In{Seq: i}).Get(ctx, &out)
		case Away:
			err = workflow.ExecuteActivity(away, "bare.noop", In{Seq: i}).Get(ctx, &out)
		default:
			err = errs.New(errs.InvalidInput, "step %d: unknown kind %d", i, s)
		}
		if err != nil {
			return Result{Steps: i}, err
		}
		if !out.OK || out.Seq != i {
			return Result{Steps: i}, errs.New(errs.Internal, "step %d: activity answered %+v", i, out)
		}
	}
	return Result{Steps: len(plan)}, nil
}
