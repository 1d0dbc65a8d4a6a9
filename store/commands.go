package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// Command is one command sent to a site or a ramdisk: a row of the log that
// `commands list --node` shows.
type Command struct {
	ID, TenantID, NodeID, SiteID string
	Kind                         string
	RunsOn                       string // site or ramdisk
	WorkflowID, RunID, Step      string
	Attempt                      int
	Status                       string // sent, succeeded, failed
	ErrorKind, Error             string
	StartedAt                    time.Time
	FinishedAt                   *time.Time
}

// Command statuses.
const (
	CommandSent      = kinds.CommandSent
	CommandSucceeded = kinds.CommandSucceeded
	CommandFailed    = kinds.CommandFailed
)

const commandColumns = `id, tenant_id, node_id, site_id, kind, runs_on, workflow_id, run_id, step, attempt,
	status, error_kind, error, started_at, finished_at`

func scanCommand(row pgx.Row) (Command, error) {
	var c Command
	err := row.Scan(&c.ID, &c.TenantID, &c.NodeID, &c.SiteID, &c.Kind, &c.RunsOn, &c.WorkflowID, &c.RunID,
		&c.Step, &c.Attempt, &c.Status, &c.ErrorKind, &c.Error, &c.StartedAt, &c.FinishedAt)
	return c, err
}

// StartCommand records that a command was sent. A step is recorded once per
// workflow run. The same start recorded again while the step is still sent
// (a local activity run again because its workflow task did not complete)
// keeps the row; any other second record of the step is ALREADY_EXISTS, so
// a step sent twice shows instead of vanishing into the first row.
func (s *Store) StartCommand(ctx context.Context, c Command) error {
	_, err := s.StartCommandAfter(ctx, nil, c)
	return err
}

// CommandOutcome is how a command ended, as FinishCommand records it.
type CommandOutcome struct {
	WorkflowID, RunID, Step string
	Status                  string
	Attempt                 int
	ErrorKind, Error        string
}

// StartCommandAfter records prev's outcome, when given, and c's start in
// one transaction and one round trip to the database (a run's next command
// starting as its last ends), and returns how long prev took (as
// FinishCommand).
func (s *Store) StartCommandAfter(ctx context.Context, prev *CommandOutcome, c Command) (time.Duration, error) {
	const op = "store.StartCommand"
	var b pgx.Batch
	var took time.Duration
	if prev != nil {
		queueFinish(&b, *prev, &took)
	}
	inserted := false
	b.Queue(`
		INSERT INTO commands (id, tenant_id, node_id, site_id, kind, runs_on, workflow_id, run_id, step, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'sent')
		ON CONFLICT (workflow_id, run_id, step) DO NOTHING`,
		c.ID, c.TenantID, c.NodeID, c.SiteID, c.Kind, c.RunsOn, c.WorkflowID, c.RunID, c.Step).
		Exec(func(tag pgconn.CommandTag) error { inserted = tag.RowsAffected() == 1; return nil })
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil || inserted {
		return took, dbError(op, err)
	}
	var kind, status string
	err := s.pool.QueryRow(ctx, `SELECT kind, status FROM commands WHERE workflow_id = $1 AND run_id = $2 AND step = $3`,
		c.WorkflowID, c.RunID, c.Step).Scan(&kind, &status)
	if err != nil {
		return took, dbError(op, err)
	}
	if kind == c.Kind && status == CommandSent {
		return took, nil
	}
	return took, errs.New(errs.AlreadyExists, "step %s of workflow %s run %s was recorded already (%s, %s): a step is sent once per run",
		c.Step, c.WorkflowID, c.RunID, kind, status).WithOp(op)
}

// FinishCommand records a command's outcome and the attempts it took, and
// returns how long it took from its start (zero for a step never started).
func (s *Store) FinishCommand(ctx context.Context, workflowID, runID, step, status string, attempt int, errKind, errMsg string) (time.Duration, error) {
	var b pgx.Batch
	var took time.Duration
	queueFinish(&b, CommandOutcome{WorkflowID: workflowID, RunID: runID, Step: step, Status: status, Attempt: attempt,
		ErrorKind: errKind, Error: errMsg}, &took)
	return took, dbError("store.FinishCommand", s.pool.SendBatch(ctx, &b).Close())
}

// queueFinish queues the update recording o, which sets took.
func queueFinish(b *pgx.Batch, o CommandOutcome, took *time.Duration) {
	b.Queue(`
		UPDATE commands SET status = $4, attempt = GREATEST(attempt, $5, 1), error_kind = $6, error = $7, finished_at = now()
		WHERE workflow_id = $1 AND run_id = $2 AND step = $3
		RETURNING EXTRACT(EPOCH FROM finished_at - started_at)::float8`,
		o.WorkflowID, o.RunID, o.Step, o.Status, max(o.Attempt, 1), o.ErrorKind, o.Error).
		QueryRow(func(row pgx.Row) error {
			var secs float64
			err := row.Scan(&secs)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			*took = time.Duration(secs * float64(time.Second))
			return err
		})
}

// RecordAttempt records that the site agent of siteID runs a step's
// attempt n; only that site's commands can be touched. Unknown steps are
// ignored: the command row may not be written yet, and FinishCommand keeps
// the highest attempt anyway.
func (s *Store) RecordAttempt(ctx context.Context, siteID, workflowID, runID, step string, n int) error {
	_, err := s.pool.Exec(ctx, `UPDATE commands SET attempt = GREATEST(attempt, $5)
		WHERE workflow_id = $1 AND run_id = $2 AND step = $3 AND site_id = $4`, workflowID, runID, step, siteID, n)
	return dbError("store.RecordAttempt", err)
}

// ListCommands returns the commands sent for the tenant's node, oldest first.
func (s *Store) ListCommands(ctx context.Context, tenantID, nodeID string) ([]Command, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+commandColumns+` FROM commands
		WHERE tenant_id = $1 AND node_id = $2 ORDER BY started_at, id`, tenantID, nodeID)
	if err != nil {
		return nil, dbError("store.ListCommands", err)
	}
	out, err := collect(rows, scanCommand)
	return out, dbError("store.ListCommands", err)
}

// SiteRunsWorkflow returns the tenant of the workflow run if site siteID
// has a command of it ("" otherwise): what a site may say about that run.
func (s *Store) SiteRunsWorkflow(ctx context.Context, siteID, workflowID, runID string) (string, error) {
	var tenant string
	err := s.pool.QueryRow(ctx, `SELECT tenant_id FROM commands WHERE workflow_id = $1 AND run_id = $2 AND site_id = $3 LIMIT 1`,
		workflowID, runID, siteID).Scan(&tenant)
	if isNoRows(err) {
		return "", nil
	}
	return tenant, dbError("store.SiteRunsWorkflow", err)
}

// CommandWrites is a batch of command-log writes that WriteCommands commits
// in one transaction, in the order queued: what command.queue hands the
// command log's writer (gathered across runs) and what command.flush
// writes again before a run moves its node. Each write can be repeated and
// come in any order with the others of its step and keep the row right: a
// start never undoes an outcome, an outcome is the same written twice.
type CommandWrites struct {
	b         pgx.Batch
	conflicts []string
	found     []bool
}

// Sent queues c's start (status sent, started at c.StartedAt): its row,
// unless its step has one already.
func (w *CommandWrites) Sent(c Command) {
	w.b.Queue(`
		INSERT INTO commands (id, tenant_id, node_id, site_id, kind, runs_on, workflow_id, run_id, step, status, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'sent', $10)
		ON CONFLICT (workflow_id, run_id, step) DO NOTHING`,
		c.ID, c.TenantID, c.NodeID, c.SiteID, c.Kind, c.RunsOn, c.WorkflowID, c.RunID, c.Step, c.StartedAt)
}

// Ended queues c's outcome (Status, ErrorKind, Error, FinishedAt, the
// highest attempt) onto its step's row. Whole writes the row too when the
// step has none (its start was lost with a writer that died); a row of
// another kind under the step is then ALREADY_EXISTS, since a step is sent
// once per run. Without whole a missing row stays missing: an outcome
// replayed into a run reset past its start belongs to the run before.
func (w *CommandWrites) Ended(c Command, whole bool) {
	if !whole {
		w.b.Queue(`
			UPDATE commands SET status = $4, attempt = GREATEST(attempt, $5), error_kind = $6, error = $7, finished_at = $8
			WHERE workflow_id = $1 AND run_id = $2 AND step = $3 AND kind = $9`,
			c.WorkflowID, c.RunID, c.Step, c.Status, max(c.Attempt, 1), c.ErrorKind, c.Error, c.FinishedAt, c.Kind).
			Exec(func(tag pgconn.CommandTag) error {
				w.found = append(w.found, tag.RowsAffected() == 1)
				return nil
			})
		return
	}
	w.queueWhole(c, func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			w.conflicts = append(w.conflicts, fmt.Sprintf("step %s of workflow %s run %s (%s)", c.Step, c.WorkflowID, c.RunID, c.Kind))
		}
		return nil
	})
}

// queueWhole queues c's whole row, written over a row of its step and kind;
// done reads how many rows it wrote (0: another kind holds the step).
func (w *CommandWrites) queueWhole(c Command, done func(pgconn.CommandTag) error) {
	w.b.Queue(`
		INSERT INTO commands (id, tenant_id, node_id, site_id, kind, runs_on, workflow_id, run_id, step, attempt,
			status, error_kind, error, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (workflow_id, run_id, step) DO UPDATE SET status = EXCLUDED.status,
			attempt = GREATEST(commands.attempt, EXCLUDED.attempt), error_kind = EXCLUDED.error_kind,
			error = EXCLUDED.error, finished_at = EXCLUDED.finished_at
		WHERE commands.kind = EXCLUDED.kind`,
		c.ID, c.TenantID, c.NodeID, c.SiteID, c.Kind, c.RunsOn, c.WorkflowID, c.RunID, c.Step, max(c.Attempt, 1),
		c.Status, c.ErrorKind, c.Error, c.StartedAt, c.FinishedAt).Exec(done)
}

// Ran queues c's start and outcome at once: the whole row as Ended with
// whole writes it, over a start already there, and Found says whether it
// holds c (not when a command of another kind holds the step; then the
// run's flush, writing it whole, says ALREADY_EXISTS). The command log's
// writer queues it for a command whose start and outcome it has together.
func (w *CommandWrites) Ran(c Command) {
	w.queueWhole(c, func(tag pgconn.CommandTag) error {
		w.found = append(w.found, tag.RowsAffected() == 1)
		return nil
	})
}

// Len is how many writes w holds.
func (w *CommandWrites) Len() int { return w.b.Len() }

// Found says, once WriteCommands committed w, whether each outcome queued
// by Ended without whole, or by Ran, found or wrote its step's row of its
// kind, in the order queued.
func (w *CommandWrites) Found() []bool { return w.found }

// WriteCommands commits w's writes in one transaction and one round trip.
// A whole outcome whose step holds a command of another kind is not
// written and makes the answer ALREADY_EXISTS; w's other writes are.
func (s *Store) WriteCommands(ctx context.Context, w *CommandWrites) error {
	const op = "store.WriteCommands"
	if w.b.Len() == 0 {
		return nil
	}
	w.conflicts, w.found = nil, nil
	if err := s.pool.SendBatch(ctx, &w.b).Close(); err != nil {
		return dbError(op, err)
	}
	if len(w.conflicts) > 0 {
		return errs.New(errs.AlreadyExists, "%s was recorded already as another command: a step is sent once per run",
			strings.Join(w.conflicts, ", ")).WithOp(op)
	}
	return nil
}
