// Package bare owns the fleet benchmark's baseline: Temporal doing what one
// of better-compute's workflows asks of it, and nothing else. It runs on the
// server the control plane uses, in its namespace, through the same clients:
// the control plane's (mTLS as the control plane, the encrypting payload
// codec) for the workflows and the control-plane activities, and a site's
// (mTLS as a site, so the authorizer checks every call, the same codec) for
// the site activities on that site's task queue. Each workflow starts with
// the search attributes of ours and runs the same sequence of local,
// control-plane-queue and site-queue activities with the options ours were
// scheduled with (timeouts, heartbeat timeouts, retry policies); each
// activity returns at once, without a heartbeat: ours heartbeat every 5 s,
// on a boot milestone (looked at each second) and on the ramdisk's
// progress (posted each second), none of which a command of a few
// milliseconds reaches: a fleet loop of ours at one machine sends none
// (counted over four loops). A larger fleet's commands that wait seconds
// for a ramdisk boot heartbeat, which is ours's cost. What a
// better-compute loop costs beyond this is better-compute's own: Postgres,
// the state compare-and-set, the command log, the relay.
package bare

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/startid"
	"github.com/better-compute/better-compute/internal/wfresult"
	bcworker "github.com/better-compute/better-compute/worker"
)

// Kind is where an activity of a plan runs.
type Kind int

const (
	// Local is a local activity (better-compute's command records).
	Local Kind = iota
	// Home is an activity on the workflow's own task queue (the control plane's).
	Home
	// Away is an activity on another worker's task queue (a site's).
	Away
)

func (k Kind) String() string { return [...]string{"local", "home", "away"}[k] }

// Step is one activity of a plan and the options it was scheduled with. A
// local activity's marker records no options: it runs with localTimeout.
type Step struct {
	Kind         Kind
	StartToClose time.Duration         `json:",omitempty"`
	Heartbeat    time.Duration         `json:",omitempty"`
	Retry        *temporal.RetryPolicy `json:",omitempty"`
}

// localTimeout is the start-to-close timeout of better-compute's local
// activities (workflows/run.go, send).
const localTimeout = 30 * time.Second

func (s Step) String() string {
	if s.Kind == Local {
		return "local"
	}
	str := fmt.Sprintf("%s(%v", s.Kind, s.StartToClose)
	if s.Heartbeat > 0 {
		str += fmt.Sprintf(" heartbeat %v", s.Heartbeat)
	}
	if r := s.Retry; r != nil {
		str += fmt.Sprintf(" retry %v×%g..%v ×%d, final %v", r.InitialInterval, r.BackoffCoefficient,
			r.MaximumInterval, r.MaximumAttempts, r.NonRetryableErrorTypes)
	}
	return str + ")"
}

// Plan is the steps of one workflow, in order.
type Plan []Step

// Counts returns how many local and how many regular activities p runs.
func (p Plan) Counts() (local, regular int) {
	for _, s := range p {
		if s.Kind == Local {
			local++
		} else {
			regular++
		}
	}
	return local, regular
}

// Flow is one workflow of a loop: its steps and the search attributes it
// starts with.
type Flow struct {
	Plan             Plan
	SearchAttributes temporal.SearchAttributes
}

// HomeQueue is the baseline's own task queue, beside the control plane's.
const HomeQueue = "bare-control-plane"

// Config says which clients the baseline works through.
type Config struct {
	// Home runs the workflows and the Home activities on HomeQueue: the
	// control plane's client.
	Home client.Client
	// Away runs the Away activities on AwayQueue: a site's client, which
	// the server's authorizer lets work that queue only.
	Away      client.Client
	AwayQueue string
}

// Baseline is the baseline's two workers.
type Baseline struct {
	cfg     Config
	workers []worker.Worker
}

// Start starts a worker on HomeQueue (the workflow and the activity) and one
// on AwayQueue (the activity). The clients stay the caller's.
func Start(cfg Config) (*Baseline, error) {
	b := &Baseline{cfg: cfg}
	opts := bcworker.Options() // as better-compute's workers
	home := worker.New(cfg.Home, HomeQueue, opts)
	home.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: "bare.loop"})
	home.RegisterActivityWithOptions(Noop, activity.RegisterOptions{Name: "bare.noop"})
	away := worker.New(cfg.Away, cfg.AwayQueue, opts)
	away.RegisterActivityWithOptions(Noop, activity.RegisterOptions{Name: "bare.noop"})
	for _, w := range []worker.Worker{home, away} {
		if err := w.Start(); err != nil {
			b.Stop()
			return nil, errs.Wrap(errs.Unavailable, err, "start a baseline worker")
		}
		b.workers = append(b.workers, w)
	}
	return b, nil
}

// Stop stops the workers. Safe to call twice.
func (b *Baseline) Stop() {
	for _, w := range b.workers {
		w.Stop()
	}
	b.workers = nil
}

// Run runs one loop of one machine: a workflow per flow, back to back, each
// started when the one before completed, all under the workflow id
// "bare/<machine>" with the start options better-compute's API uses. It
// returns the run ids.
func (b *Baseline) Run(ctx context.Context, machine string, flows []Flow) ([]string, error) {
	var runs []string
	for i, f := range flows {
		opts := client.StartWorkflowOptions{ID: "bare/" + machine, TaskQueue: HomeQueue,
			WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			WorkflowExecutionErrorWhenAlreadyStarted: true,
			TypedSearchAttributes:                    f.SearchAttributes}
		run, err := b.start(ctx, opts, Input{Plan: f.Plan, AwayQueue: b.cfg.AwayQueue})
		if err != nil {
			return runs, errs.Wrap(errs.Unavailable, err, "start workflow %d of %s", i, machine)
		}
		var out Result
		if err := wfresult.Get(ctx, b.cfg.Home, run.GetID(), run.GetRunID(), &out); err != nil {
			return runs, fmt.Errorf("workflow %d of %s: %w", i, machine, err)
		}
		if out.Steps != len(f.Plan) {
			return runs, errs.New(errs.Internal, "workflow %d of %s ran %d steps, want %d", i, machine, out.Steps, len(f.Plan))
		}
		runs = append(runs, run.GetRunID())
	}
	return runs, nil
}

// startTries bounds how often start asks for one workflow.
const startTries = 5

// start starts one workflow of a loop. A start the server did not answer in
// time is asked again (a loop of 1,000 machines starts 1,000 at once, and on
// 2 cores some outlived the SDK's 10-second bound on the call, failing the
// benchmark, where our API's starts queue behind its HTTP/2 streams): when
// the first did start it, the next finds it running under its id, the
// machine's only one, and returns it.
func (b *Baseline) start(ctx context.Context, opts client.StartWorkflowOptions, in Input) (client.WorkflowRun, error) {
	for try := 1; ; try++ {
		run, err := b.cfg.Home.ExecuteWorkflow(ctx, opts, "bare.loop", in)
		if err == nil || try == startTries || ctx.Err() != nil || !startid.Unanswered(err) {
			return run, err
		}
		opts.WorkflowExecutionErrorWhenAlreadyStarted = false
	}
}

// Input is a baseline workflow's input; Result its output.
type (
	Input struct {
		Plan      Plan
		AwayQueue string
	}
	Result struct{ Steps int }
)

// In and Out are a no-op activity's small input and output.
type (
	In  struct{ Seq int }
	Out struct {
		Seq int
		OK  bool
	}
)

// Noop is every activity of the baseline, local and regular: it returns at
// once.
func Noop(_ context.Context, in In) (Out, error) { return Out{Seq: in.Seq, OK: true}, nil }

// Workflow runs the plan's steps in order, each waited for before the next.
func Workflow(ctx workflow.Context, in Input) (Result, error) {
	for i, s := range in.Plan {
		var out Out
		if err := s.execute(ctx, in.AwayQueue, In{Seq: i}).Get(ctx, &out); err != nil {
			return Result{Steps: i}, err
		}
		if !out.OK || out.Seq != i {
			return Result{Steps: i}, errs.New(errs.Internal, "step %d: activity answered %+v", i, out)
		}
	}
	return Result{Steps: len(in.Plan)}, nil
}

// execute schedules step s with its options.
func (s Step) execute(ctx workflow.Context, awayQueue string, in In) workflow.Future {
	if s.Kind == Local {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: localTimeout})
		return workflow.ExecuteLocalActivity(lctx, Noop, in)
	}
	queue := HomeQueue
	if s.Kind == Away {
		queue = awayQueue
	}
	opts := workflow.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: s.StartToClose,
		HeartbeatTimeout: s.Heartbeat, RetryPolicy: s.Retry}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), "bare.noop", in)
}
