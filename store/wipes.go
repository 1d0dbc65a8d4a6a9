package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/nodestate"
)

// WipeKind says why a node may move into ready: the one way is a wipe the
// machine signed and wipe.verify proved; the others are exceptions a pool's
// policy allows, recorded as such.
type WipeKind string

const (
	WipeAttested WipeKind = "attested"
	// WipeAllowUnverifiedRelease: a release without an attested wipe, on a
	// pool with policy.allowUnverifiedRelease (published as
	// node.release.unverified).
	WipeAllowUnverifiedRelease WipeKind = "allowUnverifiedRelease"
	// WipeAgentNone: out-of-band commissioning on a pool whose machines run
	// no agent (agent: none), where no ramdisk can wipe.
	WipeAgentNone WipeKind = "agentNone"
)

// EventReleaseUnverified is the event an allowUnverifiedRelease exception publishes.
const EventReleaseUnverified = "node.release.unverified"

// WipeRecord is what allowed (or will allow) one move of a node into ready,
// recorded by the workflow run that made it.
type WipeRecord struct {
	ID, TenantID, NodeID, WorkflowID, RunID string
	Kind                                    WipeKind
	Mode                                    string   // attested: the modes the disks were wiped in
	Disks                                   []string // attested: the disks the attestation covers
	Signer                                  string   // attested: the ramdisk certificate that signed it
	Event                                   string   // an exception: the event it published
	RecordedAt                              time.Time
	UsedAt                                  *time.Time // when a move into ready consumed it
}

// Run names one workflow run.
type Run struct{ WorkflowID, RunID string }

// RecordWipe records an attested wipe that wipe.verify proved for a node in
// one workflow run; a move into ready by that run consumes it. The same
// proof recorded again (a retried activity) is a no-op; a different second
// record in one run is ALREADY_EXISTS: a run proves one wipe.
func (s *Store) RecordWipe(ctx context.Context, w WipeRecord) error {
	const op = "store.RecordWipe"
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO wipe_records (id, tenant_id, node_id, workflow_id, run_id, kind, mode, disks, signer)
		VALUES ($1, $2, $3, $4, $5, 'attested', $6, $7, $8)
		ON CONFLICT (node_id, workflow_id, run_id) DO NOTHING`,
		ids.New(ids.Wipe), w.TenantID, w.NodeID, w.WorkflowID, w.RunID, w.Mode, nonNil(w.Disks), w.Signer)
	if _, _, fk := violated(err); fk {
		return notFound("node", w.NodeID).WithOp(op)
	}
	if err != nil || tag.RowsAffected() == 1 {
		return dbError(op, err)
	}
	var kind WipeKind
	var mode, signer string
	err = s.pool.QueryRow(ctx, `SELECT kind, mode, signer FROM wipe_records
		WHERE node_id = $1 AND workflow_id = $2 AND run_id = $3`, w.NodeID, w.WorkflowID, w.RunID).Scan(&kind, &mode, &signer)
	if err != nil {
		return dbError(op, err)
	}
	if kind == WipeAttested && mode == w.Mode && signer == w.Signer {
		return nil
	}
	return errs.New(errs.AlreadyExists, "workflow %s run %s recorded a %s wipe of node %s already: a run proves one wipe",
		w.WorkflowID, w.RunID, kind, w.NodeID).WithOp(op)
}

// ListWipes returns the wipe records of the tenant's node, oldest first.
func (s *Store) ListWipes(ctx context.Context, tenantID, nodeID string) ([]WipeRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, tenant_id, node_id, workflow_id, run_id, kind, mode, disks, signer,
		event, recorded_at, used_at FROM wipe_records WHERE tenant_id = $1 AND node_id = $2 ORDER BY recorded_at, id`,
		tenantID, nodeID)
	if err != nil {
		return nil, dbError("store.ListWipes", err)
	}
	out, err := collect(rows, func(r pgx.Row) (WipeRecord, error) {
		var w WipeRecord
		err := r.Scan(&w.ID, &w.TenantID, &w.NodeID, &w.WorkflowID, &w.RunID, &w.Kind, &w.Mode, &w.Disks, &w.Signer,
			&w.Event, &w.RecordedAt, &w.UsedAt)
		return w, err
	})
	return out, dbError("store.ListWipes", err)
}

// moveReady moves a node from one state into ready, consuming the run's
// wipe record; the database's trigger refuses the move without one. With
// an exception asked for, it first records it (only if the node's pool
// allows it), in the same transaction; without, the move is one statement.
// It reports whether the node was in from.
func (s *Store) moveReady(ctx context.Context, tenantID, id string, from nodestate.State, t TransitionInfo) (bool, error) {
	const op = "store.Transition"
	var q execer = s.pool
	var tx pgx.Tx
	if t.Exception != "" {
		var err error
		if tx, err = s.pool.Begin(ctx); err != nil {
			return false, dbError(op, err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := recordException(ctx, tx, tenantID, id, t); err != nil {
			return false, dbError(op, err)
		}
		q = tx
	}
	tag, err := q.Exec(ctx, `
		UPDATE metal_nodes SET state = 'ready', updated_at = now(), failed_from = NULL, last_error = '',
			ready_by = (SELECT w.id FROM wipe_records w WHERE w.tenant_id = $1 AND w.node_id = $2
				AND w.workflow_id = $4 AND w.run_id = $5)
		WHERE tenant_id = $1 AND id = $2 AND state = $3`, tenantID, id, from, t.Run.WorkflowID, t.Run.RunID)
	if constraint, _, _ := violated(err); constraint == "metal_nodes_ready_needs_wipe" {
		return true, unverifiedReady(id, from, t).WithOp(op)
	}
	if err != nil {
		return false, dbError(op, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if tx != nil {
		return true, dbError(op, tx.Commit(ctx))
	}
	return true, nil
}

// execer is what moveReady's move runs on: the pool, or its transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// recordException records the wipe exception t asks for, for the run in
// t.Run, if the node's pool allows it (nothing otherwise: the move then
// finds no wipe record).
func recordException(ctx context.Context, tx pgx.Tx, tenantID, id string, t TransitionInfo) error {
	event := ""
	if t.Exception == WipeAllowUnverifiedRelease {
		event = EventReleaseUnverified
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO wipe_records (id, tenant_id, node_id, workflow_id, run_id, kind, event)
		SELECT $1, n.tenant_id, n.id, $4, $5, $6, $7
		FROM metal_nodes n JOIN pools p ON p.tenant_id = n.tenant_id AND p.id = n.pool_id
		WHERE n.tenant_id = $2 AND n.id = $3 AND CASE $6
			WHEN 'allowUnverifiedRelease' THEN COALESCE((p.policy->>'allowUnverifiedRelease')::boolean, false)
			WHEN 'agentNone' THEN p.agent = 'none'
			ELSE false END
		ON CONFLICT (node_id, workflow_id, run_id) DO NOTHING`,
		ids.New(ids.Wipe), tenantID, id, t.Run.WorkflowID, t.Run.RunID, string(t.Exception), event)
	return err
}

// unverifiedReady is the refusal of a move into ready that has no wipe
// record to consume.
func unverifiedReady(id string, from nodestate.State, t TransitionInfo) *errs.Error {
	if t.Exception != "" {
		return errs.New(errs.UnverifiedWipe, "node %s cannot move from %s to ready without an attested wipe: its pool "+
			"does not allow the %s exception", id, from, t.Exception)
	}
	return errs.New(errs.UnverifiedWipe, "node %s cannot move from %s to ready: workflow %s run %s has no attested "+
		"wipe of it to show (wipe.verify records one), or a move consumed it already", id, from, t.Run.WorkflowID, t.Run.RunID)
}
