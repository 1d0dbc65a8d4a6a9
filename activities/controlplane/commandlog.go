package controlplane

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// The command log is written behind the workflows that send the commands.
// command.queue hands a run's records to this worker's writer and returns
// at once; the writer commits what the runs queued meanwhile in one
// transaction, so a command shows in `commands list` a moment after it was
// sent. The log is durable where it matters: command.flush commits all a
// run queued since its last flush, whole, before the run moves its node or
// ends, so whatever a writer lost (its process killed, the database away
// longer than its retries) is written then, from the workflow's history.

const (
	behindQueue = 4096 // records a writer holds before command.queue writes its own
	behindBatch = 512  // writes a writer commits at most in one transaction
	behindTries = 8    // a batch's tries (about half a minute apart, first to last) before the runs' flushes have it
)

// commandWriter is a worker's command-log writer, started on first use.
type commandWriter struct {
	once sync.Once
	ch   chan kinds.CommandQueue
}

// queueCommand hands q to the writer; false when its queue is full.
func (a *Activities) queueCommand(q kinds.CommandQueue) bool {
	a.behind.once.Do(func() {
		a.behind.ch = make(chan kinds.CommandQueue, behindQueue)
		go a.writeBehind(a.behind.ch)
	})
	select {
	case a.behind.ch <- q:
		return true
	default:
		return false
	}
}

// writeBehind commits what ch brings, all that waits at once in one
// transaction, in the order queued.
func (a *Activities) writeBehind(ch <-chan kinds.CommandQueue) {
	batch := make([]kinds.CommandQueue, 0, behindBatch)
	for q := range ch {
		batch = append(batch[:0], q)
	gather:
		for len(batch) < behindBatch {
			select {
			case q := <-ch:
				batch = append(batch, q)
			default:
				break gather
			}
		}
		a.writeQueued(batch)
	}
}

// writeQueued commits batch, trying again while the database is away
// (0.25 s, then twice as long each time: about half a minute in all);
// then the runs' flushes write it.
func (a *Activities) writeQueued(batch []kinds.CommandQueue) {
	wait := 250 * time.Millisecond
	for try := 1; ; try++ {
		var w store.CommandWrites
		for _, q := range batch {
			queueWrites(&w, q)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := a.Store.WriteCommands(ctx, &w)
		cancel()
		if err == nil {
			return
		}
		if try == behindTries {
			slog.Warn("command log: records not written; their runs write them again before they move their nodes",
				"records", len(batch), "err", err)
			return
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// queueWrites queues what q records: the last command's outcome, then the
// next command's start.
func queueWrites(w *store.CommandWrites, q kinds.CommandQueue) {
	if q.Outcome != nil {
		w.Ended(storeCommand(*q.Outcome), false)
	}
	if q.Start != nil {
		w.Sent(storeCommand(*q.Start))
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
		queueWrites(&w, q)
		if err := a.Store.WriteCommands(ctx, &w); err != nil {
			return "", errs.ToTemporal(err)
		}
	}
	a.commandFinished(q.Outcome)
	return activity.GetInfo(ctx).WorkflowExecution.RunID, nil
}

// FlushCommands (command.flush, a local activity) commits the run's
// commands since its last flush, whole, and the outcome it had not queued,
// in one transaction. A step recorded under another kind is ALREADY_EXISTS.
func (a *Activities) FlushCommands(ctx context.Context, f kinds.CommandFlush) error {
	var w store.CommandWrites
	outcomeWritten := false
	for _, c := range f.Commands {
		if c.Status == "" {
			w.Sent(storeCommand(c))
			continue
		}
		w.Ended(storeCommand(c), true)
		outcomeWritten = outcomeWritten || (f.Outcome != nil && c.Step == f.Outcome.Step)
	}
	if f.Outcome != nil && !outcomeWritten { // queued in the run before a reset
		w.Ended(storeCommand(*f.Outcome), false)
	}
	if err := a.Store.WriteCommands(ctx, &w); err != nil {
		return errs.ToTemporal(err)
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
