package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/steps"
)

// ControlPlaneQueue is the task queue of the control plane's own activities.
const ControlPlaneQueue = "control-plane"

// run is all the state of one verb's workflow.
type run struct {
	ctx   workflow.Context
	in    Input
	node  kinds.NodeInfo
	state nodestate.State
	seq   int // numbers the steps, so each step id is unique in the run
	info  *workflow.Info
	// discovered is the MAC PXE discovery gave the node in this run, which
	// the ramdisk's inventory must confirm (checkDiscovered).
	discovered string
	aborting   bool   // leaveSafe runs: fewer tries per site command
	bmcStatus  string // what BmcStatus says now ("" unset); bmcstatus.go
	bmcAsked   bool   // bmc-status-attribute's version is asked (tracksBMC)
	bmcTracked bool   // this run keeps BmcStatus (a run from before does not)
	// outcome is the last command's outcome not yet in the command log:
	// with mergedRecords the next command's start records it, in the same
	// local activity, or recordOutcome does before the workflow does
	// anything else.
	outcome       *kinds.CommandRecord
	mergedRecords bool // commandRecordsMerged's version is 1
	// behind: commandLogBehind's version is 1 or more. The run hands its records
	// to the command log's writer (command.queue) and keeps queued, the
	// commands it queued since its last flush as they ended, for flush.
	behind bool
	queued []kinds.CommandRecord
	// refuses: commandLogBehind's version is refusalsRecorded (refused;
	// DeployWorkflow pins its images before the node moves).
	refuses bool
}

// commandRecordsMerged is the workflow.GetVersion change id of recording a
// command's outcome with the next command's start: histories from before
// record each in a local activity of its own.
const commandRecordsMerged = "command-records-merged"

// commandLogBehind is the workflow.GetVersion change id of the command log
// written behind the run (command.queue), made durable before the run
// moves its node or ends (command.flush): histories from before commit
// each record in their local activity (command.start, command.finish).
// It implies commandRecordsMerged, which a run of it does not ask.
const commandLogBehind = "command-log-behind"

// refusalsRecorded is commandLogBehind's version from which a verb that
// fails before it moved the node records why on the node (refused), and a
// deploy pins its plan's images at the site before the node moves. It
// rides on commandLogBehind's marker, which every run records anyway, as
// its second version: a change id of its own would cost each run a marker
// and a search-attribute upsert more.
const refusalsRecorded = 2

func newRun(ctx workflow.Context, in Input) (*run, error) {
	r := &run{ctx: ctx, in: in, info: workflow.GetInfo(ctx)}
	rev := workflow.GetVersion(ctx, commandLogBehind, workflow.DefaultVersion, refusalsRecorded)
	r.behind, r.refuses = rev >= 1, rev >= refusalsRecorded
	r.mergedRecords = r.behind || workflow.GetVersion(ctx, commandRecordsMerged, workflow.DefaultVersion, 1) == 1
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActGetNode,
		kinds.NodeRef{TenantID: in.TenantID, NodeID: in.NodeID}).Get(ctx, &r.node); err != nil {
		return nil, err
	}
	r.state = r.node.State
	r.watchBMCStatus()
	return r, nil
}

// cpTimeout is the start-to-close of a control-plane activity: one
// PostgreSQL transaction: 3.5 ms at one machine and about 55 ms at 20 looping
// at once on 2 cores (BenchmarkFleet, waits for a core included). A worker
// killed under one, or a completion lost on the way, costs this before
// Temporal retries the activity on another worker (a minute until then), as
// a lost site command costs its heartbeat timeout; a database that refuses
// or drops the connection fails the attempt at once, and the retries
// (cpOptions) wait it out.
const cpTimeout = 30 * time.Second

// cp returns a context for a control-plane activity, once the last
// command's outcome is in the command log (recordOutcome).
func (r *run) cp() workflow.Context {
	r.recordOutcome()
	return workflow.WithActivityOptions(r.ctx, cpOptions())
}

// cpOptions are the options of a control-plane activity of a verb or of
// metal.update: up to 10 attempts, 1 s apart doubling to 30 s, the final
// kinds not retried.
func cpOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           ControlPlaneQueue,
		StartToCloseTimeout: cpTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 10, NonRetryableErrorTypes: errs.FinalKinds()},
	}
}

// move moves the node to state to, compare-and-set from where it is. A
// move into ready consumes the wipe this run proved (see wipe); the store
// refuses it without one.
func (r *run) move(to nodestate.State) error { return r.moveWith(to, "") }

// readyWithout moves the node into ready without an attested wipe, under
// exception (ExceptionUnverifiedRelease, ExceptionAgentNone), which the
// store records if the node's pool allows it and refuses otherwise.
func (r *run) readyWithout(exception string) error { return r.moveWith(nodestate.Ready, exception) }

func (r *run) moveWith(to nodestate.State, exception string) error {
	// The node does not move ahead of its command log. (A run from before
	// behind went on when its outcome could not be recorded: cp.)
	if err := r.flush(); err != nil && r.behind {
		return err
	}
	in := kinds.TransitionInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, From: r.state, To: to,
		WorkflowID: r.info.WorkflowExecution.ID, RunID: r.info.WorkflowExecution.RunID, Exception: exception}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActTransition, in).Get(r.ctx, nil); err != nil {
		return err
	}
	r.state = to
	return nil
}

// fail moves the node to failed from the active state it is in, with the
// error, even when the workflow was cancelled (metal.abort); refused
// handles a node the verb did not move.
func (r *run) fail(cause error) {
	r.flush()
	in := kinds.TransitionInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, From: r.state, To: nodestate.Failed,
		Error: endError(cause), Maintenance: kindOf(cause) == errs.UnverifiedWipe}
	if err := r.atEnd(kinds.ActTransition, 20, in); err != nil {
		workflow.GetLogger(r.ctx).Error("could not mark the node failed", "node", r.in.NodeID, "err", err)
		return
	}
	r.state = nodestate.Failed
}

// refused shows on the node, which verb v left in its resting state, why
// the verb failed there (a deploy whose image its site cannot fetch), so
// the node says it and metal wait stops waiting; even when the workflow
// was cancelled (metal.abort). Runs from before refusalsRecorded did not;
// a failed node keeps its failure's error (KeepsRefusal).
func (r *run) refused(v nodestate.Verb, cause error) {
	r.flush()
	if !r.refuses || !r.state.KeepsRefusal() {
		return
	}
	in := kinds.RefusalInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, State: r.state,
		Error: fmt.Sprintf("%s failed and left the node %s: %s", v, r.state, endError(cause))}
	if err := r.atEnd(kinds.ActRecordRefusal, 20, in); err != nil {
		workflow.GetLogger(r.ctx).Error("could not record the refusal on the node", "node", r.in.NodeID, "err", err)
	}
}

// endError is what the node shows of the error that ended its verb.
func endError(cause error) string {
	if temporal.IsCanceledError(cause) {
		return "aborted"
	}
	return lastError(cause)
}

// atEnd runs the control-plane activity name, even in a cancelled run,
// up to attempts tries with every error retried: what records how the verb
// ended, or forgets what it began (endMACWait).
func (r *run) atEnd(name string, attempts int32, in any) error {
	ctx, cancel := workflow.NewDisconnectedContext(r.ctx)
	defer cancel()
	opts := workflow.ActivityOptions{TaskQueue: ControlPlaneQueue, StartToCloseTimeout: cpTimeout,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: attempts}}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), name, in).Get(ctx, nil)
}

// lastError is the one line a failed node shows: what the failing step's
// error said (kind and message, as errs writes them), or which of its
// timeouts ran out, without Temporal's wrapping ("activity error (type: …,
// scheduledEventID: …)", "(type: …, retryable: …)"), with the step's kind in
// front when the message does not name it.
func lastError(err error) string {
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	var msg string
	switch {
	case errors.As(err, &app):
		msg = app.Message()
	case errors.As(err, &timeout):
		msg = "timed out (" + timeout.TimeoutType().String() + ")"
		if why, ok := timedOut[timeout.TimeoutType()]; ok {
			msg = "timed out: " + why
		}
	default:
		return err.Error()
	}
	var act *temporal.ActivityError
	if errors.As(err, &act) && !strings.HasPrefix(msg, act.ActivityType().Name) {
		msg = act.ActivityType().Name + ": " + msg
	}
	return msg
}

// timedOut says what each of an activity's timeouts running out means.
var timedOut = map[enumspb.TimeoutType]string{
	enumspb.TIMEOUT_TYPE_HEARTBEAT:         "its worker sent no heartbeat in time (the site agent, or its ramdisk, stopped?)",
	enumspb.TIMEOUT_TYPE_START_TO_CLOSE:    "it did not finish in time (start-to-close)",
	enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START: "no worker took it in time (is its site agent running?)",
	enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE: "it did not finish in time, retries included (schedule-to-close)",
}

// kindOf reads the error kind a failed activity carried.
func kindOf(err error) errs.Kind { return errs.FromTemporal(err) }

// next returns the next step id for kind, unique in the run and stable on
// replay, so it names the command and the activity, and its number.
func (r *run) next(kind string) (string, int) {
	r.seq++
	return fmt.Sprintf("%02d.%s", r.seq, kind), r.seq
}

// siteHeartbeat is the heartbeat timeout of the site commands whose
// activities heartbeat every 5 s while they run or wait: every ramdisk
// command (the relay), cache.ensureImage, the BMC calls (the site's BMC
// gate) and a plugin's retry-safe site steps (their activity). A site agent
// that dies under one is found out within it and the command retried, not
// at its start-to-close (2 minutes for a BMC call).
const siteHeartbeat = 20 * time.Second

// heartbeatOf is the heartbeat timeout of the lifecycle's site kind sent as
// a site command: siteHeartbeat for a BMC call, none for a boot table
// write, which does not heartbeat (its start-to-close is short).
func heartbeatOf(kind string) time.Duration {
	if kinds.TalksToBMC(kind) {
		return siteHeartbeat
	}
	return 0
}

// siteOptions are the options of a command to the site.
func (r *run) siteOptions(step string, timeout time.Duration, heartbeat time.Duration) workflow.Context {
	return workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		TaskQueue:           kinds.SiteTaskQueue(r.node.SiteID),
		ActivityID:          step,
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
			MaximumAttempts: r.siteAttempts(), NonRetryableErrorTypes: errs.FinalKinds()},
	})
}

// siteAttempts bounds a site command's tries: 8, or 2 while an abort
// leaves the machine safe, so a dead BMC cannot hold the abort for minutes.
func (r *run) siteAttempts() int32 {
	if r.aborting {
		return 2
	}
	return 8
}

// send sends a command of kind, a built-in site step, to the site with
// the step's timeout, and returns the step id it made for it.
func (r *run) send(kind string, in, out any) (string, error) {
	step, _ := r.next(kind)
	return step, r.command(step, kind, "site", r.siteOptions(step, steps.Timeout(kind), heartbeatOf(kind)), in, out)
}

// command runs the activity kind as step with actx's options, recording it
// in the command log before and after. With mergedRecords its outcome is
// recorded by the next command's start (commands mostly come back to back:
// one local activity instead of two) or by recordOutcome; with behind both
// are handed to the command log's writer, and flush makes them durable.
func (r *run) command(step, kind, runsOn string, actx workflow.Context, in, out any) error {
	rec := kinds.CommandRecord{TenantID: r.in.TenantID, NodeID: r.in.NodeID, SiteID: r.node.SiteID, Kind: kind,
		RunsOn: runsOn, WorkflowID: r.info.WorkflowExecution.ID, RunID: r.info.WorkflowExecution.RunID, Step: step}
	queued := false
	if r.behind {
		rec.StartedAt = workflow.Now(r.ctx)
		start := rec
		var ranIn string // the run command.queue ran in: the one before, replayed into a run reset past this step
		if err := workflow.ExecuteLocalActivity(r.recordContext(r.ctx), kinds.ActQueueCommand,
			kinds.CommandQueue{Outcome: r.outcome, Start: &start}).Get(r.ctx, &ranIn); err != nil {
			return err
		}
		queued = ranIn == rec.RunID
	} else {
		start := rec
		start.Previous = r.outcome
		if err := workflow.ExecuteLocalActivity(r.recordContext(r.ctx), kinds.ActStartCommand, start).Get(r.ctx, nil); err != nil {
			return err
		}
	}
	r.outcome = nil
	err := workflow.ExecuteActivity(actx, kind, in).Get(r.ctx, out)
	if err == nil && isBMCKind(kind) {
		r.setBMCStatus("") // the BMC answered: whatever the site said of it is over
	}
	rec.Status = kinds.CommandSucceeded
	switch {
	case temporal.IsCanceledError(err): // metal.abort: not an INTERNAL failure
		rec.Status, rec.Error = kinds.CommandAborted, "aborted"
	case err != nil:
		rec.Status, rec.ErrorKind, rec.Error = kinds.CommandFailed, string(kindOf(err)), lastError(err)
	}
	if r.behind {
		rec.FinishedAt = workflow.Now(r.ctx)
		if queued {
			r.queued = append(r.queued, rec)
		}
	}
	r.outcome = &rec
	if r.mergedRecords {
		return err
	}
	ferr := r.recordOutcome()
	r.outcome = nil // a run from before recorded each outcome once, at once
	if ferr != nil && err == nil {
		return ferr
	}
	return err
}

// recordOutcome records the last command's outcome if it is not yet in the
// command log, even in a cancelled run (metal.abort): with behind it hands
// it to the command log's writer. A failure is returned and the outcome
// kept for the next try.
func (r *run) recordOutcome() error {
	if r.outcome == nil {
		return nil
	}
	dctx, cancel := workflow.NewDisconnectedContext(r.ctx)
	defer cancel()
	var err error
	if r.behind {
		err = workflow.ExecuteLocalActivity(r.recordContext(dctx), kinds.ActQueueCommand,
			kinds.CommandQueue{Outcome: r.outcome}).Get(dctx, nil)
	} else {
		err = workflow.ExecuteLocalActivity(r.recordContext(dctx), kinds.ActFinishCommand, *r.outcome).Get(dctx, nil)
	}
	if err != nil {
		return err
	}
	r.outcome = nil
	return nil
}

// flush makes the run's command log durable before the run moves its node,
// waits long or ends, even in a cancelled run: command.flush commits the
// commands it queued since its last flush as they ended, and the outcome
// not queued yet, whatever the writer did with them. A run from before
// behind records the outcome (recordOutcome).
func (r *run) flush() error {
	if !r.behind {
		return r.recordOutcome()
	}
	if len(r.queued) == 0 && r.outcome == nil {
		return nil
	}
	dctx, cancel := workflow.NewDisconnectedContext(r.ctx)
	defer cancel()
	f := kinds.CommandFlush{Commands: r.queued, Outcome: r.outcome}
	if err := workflow.ExecuteLocalActivity(r.recordContext(dctx), kinds.ActFlushCommands, f).Get(dctx, nil); err != nil {
		return err
	}
	r.queued, r.outcome = nil, nil
	return nil
}

// recordContext is ctx with the command log's local activity options.
func (r *run) recordContext(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
}

// ramdisk sends a ramdisk kind through the site's relay and decodes the
// signed result's payload into out.
func (r *run) ramdisk(kind string, timeout time.Duration, payload any, out any) (kinds.Result, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return kinds.Result{}, err
	}
	step, n := r.next(kind)
	// The id is the step's, fixed before the activity runs, so an activity
	// retried after a site agent crash asks the ramdisk for the same command.
	cmd := kinds.Command{NodeID: r.in.NodeID, Kind: kind, Payload: b,
		ID: fmt.Sprintf("%s/%s/%02d", r.info.WorkflowExecution.ID, r.info.WorkflowExecution.RunID, n)}
	var res kinds.Result
	if err := r.command(step, kind, "ramdisk", r.siteOptions(step, timeout, siteHeartbeat), cmd, &res); err != nil {
		return res, err
	}
	if out != nil && len(res.Payload) > 0 {
		if err := json.Unmarshal(res.Payload, out); err != nil {
			return res, fmt.Errorf("%s result: %w", kind, err)
		}
	}
	return res, nil
}

func (r *run) bmc() kinds.BMCTarget { return r.node.BMC }
