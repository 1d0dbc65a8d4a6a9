package store

import (
	"context"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
)

// Unfail moves failed node id back to state to, compare-and-set on failed
// (nodestate.CheckRetry), clearing failedFrom and the error: the move
// `workflows retry --from-step` makes before it resets the failed run.
// Refail undoes it if the reset is refused.
func (s *Store) Unfail(ctx context.Context, tenantID, id string, to nodestate.State) error {
	const op = "store.Unfail"
	if err := nodestate.CheckRetry(nodestate.Failed, to); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE metal_nodes SET state = $3, updated_at = now(), failed_from = NULL, last_error = ''
		WHERE tenant_id = $1 AND id = $2 AND state = 'failed'`, tenantID, id, to)
	if err != nil {
		return dbError(op, err)
	}
	if tag.RowsAffected() != 1 { // moved since it was read: nothing is reset
		return errs.New(errs.InvalidState, "node %s is no longer failed: not moved back to %s", id, to).WithOp(op)
	}
	return nil
}

// Refail puts node id back as Unfail found it (failed from failedFrom with
// lastError), compare-and-set on state from, where Unfail moved it.
func (s *Store) Refail(ctx context.Context, tenantID, id string, from, failedFrom nodestate.State, lastError string) error {
	const op = "store.Refail"
	tag, err := s.pool.Exec(ctx, `
		UPDATE metal_nodes SET state = 'failed', updated_at = now(), failed_from = NULLIF($4, ''), last_error = $5
		WHERE tenant_id = $1 AND id = $2 AND state = $3`, tenantID, id, from, failedFrom, storableText(lastError))
	if err != nil {
		return dbError(op, err)
	}
	if tag.RowsAffected() != 1 {
		return errs.New(errs.InvalidState, "node %s is no longer %s: not put back to failed", id, from).WithOp(op)
	}
	return nil
}
