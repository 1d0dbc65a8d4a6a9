package controlplane

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// The command log is written behind the workflows that send the commands.
// command.queue hands a run's records to this worker's writer and returns
// at once; the writer gathers what the runs queue for up to behindLinger
// and commits it in one transaction, so a command shows in `commands list`
// a moment after it was sent. A command that ended within the gathering
// (most do: a BMC call, a boot entry, a control-plane step) is written
// once, its start and outcome in one row write, not a start and then an
// update. The log is durable where it matters: command.flush makes all a
// run queued since its last flush durable before the run moves its node or
// ends, and cuts the writer's gathering short. The writer remembers what it
// committed, so a flush in the same process whose records it committed
// writes nothing (and one whose records it still holds waits for them);
// whatever the writer lost (its process killed, the database away longer
// than its retries), or another process's writer had, the flush writes
// whole, from the workflow's history.

const (
	behindQueue   = 4096    // records a writer holds before command.queue writes its own
	behindBatch   = 512     // writes a writer commits at most in one transaction
	behindTries   = 8       // a batch's tries (about half a minute apart, first to last) before the runs' flushes have it
	behindTracked = 1 << 16 // outcomes a writer remembers before it forgets those it holds nothing of
	flushWait     = 5 * time.Second
	// behindLinger is how long the writer gathers after the first record
	// of a batch, unless a flush waits: long enough for most commands to
	// end within it (at one machine, a loop's 16 commands took 32 writes
	// and 16 commits; see writeBehind), short enough for `commands list`
	// to show a command as sent a moment after it was.
	behindLinger = 50 * time.Millisecond
)

// commandWriter is a worker's command-log writer, started on first use,
// and the outcomes it was handed, until their runs flushed.
type commandWriter struct {
	once sync.Once
	ch   chan kinds.CommandQueue

	linger time.Duration // behindLinger unless a test sets it first
	writes atomic.Int64  // statements the writer sent, for tests

	mu       sync.Mutex
	outcomes map[stepKey]*outcomeWrite
	progress chan struct{} // closed, and made anew, each time the writer ends a batch
	flushing int           // flushes waiting for the writer: it gathers no longer
	kick     chan struct{} // a flush began waiting
}

// stepKey names a step's row of the command log.
type stepKey struct{ workflowID, runID, step string }

func keyOf(c *kinds.CommandRecord) stepKey { return stepKey{c.WorkflowID, c.RunID, c.Step} }

// outcomeWrite is what a writer did with a step's outcome. A flush writes
// only ended commands, and an outcome whose update found its row needs its
// start no more: the starts are not followed.
type outcomeWrite struct {
	holds int                  // handed to the writer and not yet committed or given up
	ended *kinds.CommandRecord // committed onto the step's row of its kind
}

// queueCommand hands q to the writer; false when its queue is full.
func (a *Activities) queueCommand(q kinds.CommandQueue) bool {
	w := &a.behind
	w.once.Do(func() {
		w.ch = make(chan kinds.CommandQueue, behindQueue)
		go a.writeBehind(w.ch)
	})
	w.hand(q.Outcome, 1)
	select {
	case w.ch <- q:
		return true
	default:
		w.hand(q.Outcome, -1)
		return false
	}
}

// hand counts the outcome o (nil: none) as held by the writer (n 1) or no
// longer (n -1).
func (w *commandWriter) hand(o *kinds.CommandRecord, n int) {
	if o == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.initLocked()
	ow := w.outcomes[keyOf(o)]
	if ow == nil {
		if len(w.outcomes) >= behindTracked {
			w.sweepLocked()
		}
		ow = &outcomeWrite{}
		w.outcomes[keyOf(o)] = ow
	}
	ow.holds += n
}

// initLocked makes the writer's memory on first use.
func (w *commandWriter) initLocked() {
	if w.outcomes == nil {
		w.outcomes, w.progress, w.kick = map[stepKey]*outcomeWrite{}, make(chan struct{}), make(chan struct{}, 1)
	}
}

// sweepLocked forgets the outcomes the writer holds nothing of: of runs
// that flushed in another process, or never will. Their flushes, if any,
// write.
func (w *commandWriter) sweepLocked() {
	for k, ow := range w.outcomes {
		if ow.holds <= 0 {
			delete(w.outcomes, k)
		}
	}
}

// wrote records the end of batch: committed, with found saying which
// outcomes found their rows (store.CommandWrites.Found), or given up.
func (w *commandWriter) wrote(batch []kinds.CommandQueue, committed bool, found []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.initLocked()
	for _, q := range batch {
		o := q.Outcome
		if o == nil {
			continue
		}
		if ow := w.outcomes[keyOf(o)]; ow != nil {
			ow.holds--
			if committed && len(found) > 0 && found[0] {
				ow.ended = o
			}
		}
		if len(found) > 0 {
			found = found[1:]
		}
	}
	close(w.progress)
	w.progress = make(chan struct{})
}

// committed reports whether the writer committed all of recs (a flush's
// records, flushed) as they stand, onto their rows, waiting up to
// flushWait while it holds some of them; false, at once, when some never
// reached this writer or were given up. What it committed, it forgets.
func (w *commandWriter) committed(ctx context.Context, recs []*kinds.CommandRecord) bool {
	var timeout <-chan time.Time
	for {
		w.mu.Lock()
		done, held := w.checkLocked(recs)
		if done {
			w.forgetLocked(recs)
		}
		progress := w.progress
		w.mu.Unlock()
		if done || !held {
			return done
		}
		if timeout == nil {
			t := time.NewTimer(flushWait)
			defer t.Stop()
			timeout = t.C
			defer w.waiting()()
		}
		select {
		case <-progress:
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// waiting counts a flush as waiting for the writer, and wakes the writer
// if it is gathering; the function it returns counts it out again.
func (w *commandWriter) waiting() func() {
	w.mu.Lock()
	w.initLocked()
	w.flushing++
	kick := w.kick
	w.mu.Unlock()
	select {
	case kick <- struct{}{}:
	default: // a kick is pending already
	}
	return func() {
		w.mu.Lock()
		w.flushing--
		w.mu.Unlock()
	}
}

// hurried reports whether a flush waits for the writer, and the channel
// that says when one begins to.
func (w *commandWriter) hurried() (bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.initLocked()
	return w.flushing > 0, w.kick
}

// checkLocked says whether the writer committed all of recs, and if not,
// whether it still holds all of those it did not.
func (w *commandWriter) checkLocked(recs []*kinds.CommandRecord) (done, held bool) {
	done, held = true, true
	for _, c := range recs {
		ow := w.outcomes[keyOf(c)]
		if ow == nil || c.Status == "" {
			return false, false
		}
		if ow.ended != nil && sameRecord(*ow.ended, *c) {
			continue
		}
		done = false
		held = held && ow.holds > 0
	}
	return done, held
}

// forget drops what the writer remembers of recs, once it holds none of
// them.
func (w *commandWriter) forget(recs []*kinds.CommandRecord) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(recs)
}

func (w *commandWriter) forgetLocked(recs []*kinds.CommandRecord) {
	for _, c := range recs {
		if ow := w.outcomes[keyOf(c)]; ow != nil && ow.holds <= 0 {
			delete(w.outcomes, keyOf(c))
		}
	}
}

// flushed is every record f writes: its commands, and its outcome when
// they do not hold it.
func flushed(f kinds.CommandFlush) []*kinds.CommandRecord {
	out := make([]*kinds.CommandRecord, 0, len(f.Commands)+1)
	outcomeIn := false
	for i := range f.Commands {
		out = append(out, &f.Commands[i])
		outcomeIn = outcomeIn || (f.Outcome != nil && f.Commands[i].Step == f.Outcome.Step)
	}
	if f.Outcome != nil && !outcomeIn {
		out = append(out, f.Outcome)
	}
	return out
}

// sameRecord reports whether a and b record the same (their times equal
// as instants).
func sameRecord(a, b kinds.CommandRecord) bool {
	if !a.StartedAt.Equal(b.StartedAt) || !a.FinishedAt.Equal(b.FinishedAt) {
		return false
	}
	a.StartedAt, a.FinishedAt, a.Previous = b.StartedAt, b.FinishedAt, b.Previous
	return a == b
}

// writeBehind commits what ch brings in batches, each in one transaction,
// in the order queued. A batch gathers for the writer's linger after its
// first record, or until a flush waits or the batch is full; then it takes
// what else waits at once. Writing the start and the outcome of each
// command apart cost one machine's loop 32 writes and 16 commits, as many
// statements in PostgreSQL as the rest of the loop's work.
func (a *Activities) writeBehind(ch <-chan kinds.CommandQueue) {
	w := &a.behind
	linger := w.linger
	if linger <= 0 {
		linger = behindLinger
	}
	batch := make([]kinds.CommandQueue, 0, behindBatch)
	for q := range ch {
		batch = append(batch[:0], q)
		t := time.NewTimer(linger)
	gather:
		for len(batch) < behindBatch {
			hurry, kick := w.hurried()
			if hurry {
				break
			}
			select {
			case q := <-ch:
				batch = append(batch, q)
			case <-kick:
			case <-t.C:
				break gather
			}
		}
		t.Stop()
	drain:
		for len(batch) < behindBatch {
			select {
			case q := <-ch:
				batch = append(batch, q)
			default:
				break drain
			}
		}
		found, err := a.writeQueued(batch)
		w.wrote(batch, err == nil, found)
	}
}

// writeQueued commits batch, trying again while the database is away
// (0.25 s, then twice as long each time: about half a minute in all);
// then the runs' flushes write it. It returns which outcomes found their
// rows.
func (a *Activities) writeQueued(batch []kinds.CommandQueue) ([]bool, error) {
	wait := 250 * time.Millisecond
	for try := 1; ; try++ {
		var w store.CommandWrites
		queueBatch(&w, batch)
		a.behind.writes.Add(int64(w.Len()))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := a.Store.WriteCommands(ctx, &w)
		cancel()
		if err == nil {
			return w.Found(), nil
		}
		if try == behindTries {
			slog.Warn("command log: records not written; their runs write them again before they move their nodes",
				"records", len(batch), "err", err)
			return nil, err
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// queueBatch queues what batch records, in order: each record's outcome
// of the last command, then its start of the next, each command once: a
// start whose outcome the batch holds too is not written apart, its
// outcome writes the whole row (store.CommandWrites.Ran) where it would
// have updated the start's, so the outcomes' writes stay one a record, in
// order, as wrote reads them.
func queueBatch(w *store.CommandWrites, batch []kinds.CommandQueue) {
	ended := map[stepKey]*kinds.CommandRecord{}
	for _, q := range batch {
		if q.Outcome != nil {
			ended[keyOf(q.Outcome)] = q.Outcome
		}
	}
	ran := map[stepKey]bool{} // steps whose start the batch skipped
	for _, q := range batch {
		if o := q.Outcome; o != nil {
			if ran[keyOf(o)] {
				w.Ran(storeCommand(*o))
			} else {
				w.Ended(storeCommand(*o), false)
			}
		}
		if st := q.Start; st != nil {
			if o := ended[keyOf(st)]; o != nil && o.Kind == st.Kind {
				ran[keyOf(st)] = true
				continue
			}
			w.Sent(storeCommand(*st))
		}
	}
}

func storeCommand(c kinds.CommandRecord) store.Command {
	out := store.Command{ID: ids.New(ids.Command), TenantID: c.TenantID, NodeID: c.NodeID, SiteID: c.SiteID,
		Kind: c.Kind, RunsOn: c.RunsOn, WorkflowID: c.WorkflowID, RunID: c.RunID, Step: c.Step, Attempt: c.Attempt,
		Status: c.Status, ErrorKind: c.ErrorKind, Error: c.Error, StartedAt: c.StartedAt}
	if !c.FinishedAt.IsZero() {
		out.FinishedAt = &c.FinishedAt
	}
	return out
}

// QueueCommand (command.queue, a local activity) hands the run's records to
// this worker's command-log writer and returns the run it was handed in.
// When the writer is a full queue behind, it commits them itself first.
func (a *Activities) QueueCommand(ctx context.Context, q kinds.CommandQueue) (string, error) {
	if !a.queueCommand(q) {
		var w store.CommandWrites
		queueBatch(&w, []kinds.CommandQueue{q})
		if err := a.Store.WriteCommands(ctx, &w); err != nil {
			return "", errs.ToTemporal(err)
		}
	}
	a.commandFinished(q.Outcome)
	return activity.GetInfo(ctx).WorkflowExecution.RunID, nil
}

// FlushCommands (command.flush, a local activity) makes the run's commands
// since its last flush durable, and the outcome it had not queued: nothing
// to write when this worker's writer committed them as they stand, else
// all whole in one transaction. A step recorded under another kind is
// ALREADY_EXISTS.
func (a *Activities) FlushCommands(ctx context.Context, f kinds.CommandFlush) error {
	recs := flushed(f)
	if !a.behind.committed(ctx, recs) {
		var w store.CommandWrites
		for _, c := range recs {
			if c.Status == "" {
				w.Sent(storeCommand(*c))
				continue
			}
			// The outcome not among the commands was queued before a reset: not
			// written whole, its start belongs to the run before.
			w.Ended(storeCommand(*c), c != f.Outcome)
		}
		if err := a.Store.WriteCommands(ctx, &w); err != nil {
			return errs.ToTemporal(err)
		}
		a.behind.forget(recs)
	}
	a.commandFinished(f.Outcome)
	return nil
}

// commandFinished counts an outcome handed to the command log, once.
func (a *Activities) commandFinished(o *kinds.CommandRecord) {
	if o != nil {
		a.Metrics.CommandFinished(o.Kind, o.Status, o.FinishedAt.Sub(o.StartedAt))
	}
}
