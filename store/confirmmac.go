package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

// ConfirmMAC binds mac to a node enrolled without MACs whose wait is in
// state from (WaitMACConfirmation when an operator confirms,
// WaitPXEDiscovery when a pool that trusts its provisioning network takes
// the candidate at once), and ends the wait; it returns the node. In one
// transaction, holding the node, its wait and the discovery: the node must
// be waiting as from (else INVALID_STATE), mac must have been seen
// PXE-booting on the node's site (else INVALID_INPUT), and no other live
// node of the tenant may have it (else ALREADY_EXISTS naming that node).
// On any refusal nothing changes.
func (s *Store) ConfirmMAC(ctx context.Context, tenantID, nodeID, mac, from string) (Node, error) {
	const op = "store.ConfirmMAC"
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Node{}, dbError(op, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	n, err := scanNode(tx.QueryRow(ctx, "SELECT "+nodeColumns+" FROM metal_nodes WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
		tenantID, nodeID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Node{}, notFound("node", nodeID).WithOp(op)
	}
	if err != nil {
		return Node{}, dbError(op, err)
	}
	if err := checkWaiting(ctx, tx, n, from); err != nil {
		return Node{}, err.WithOp(op)
	}
	if err := checkFree(ctx, tx, n, mac); err != nil {
		return Node{}, err.WithOp(op)
	}
	n, err = scanNode(tx.QueryRow(ctx, `UPDATE metal_nodes SET macs = ARRAY[$3], updated_at = now()
		WHERE tenant_id = $1 AND id = $2 RETURNING `+nodeColumns, tenantID, nodeID, mac))
	if err != nil {
		return Node{}, dbError(op, err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM node_mac_waits WHERE tenant_id = $1 AND node_id = $2", tenantID, nodeID); err != nil {
		return Node{}, dbError(op, err)
	}
	return n, dbError(op, tx.Commit(ctx))
}

// checkWaiting refuses a node that is not waiting for a MAC as from.
func checkWaiting(ctx context.Context, tx pgx.Tx, n Node, from string) *errs.Error {
	var waiting, candidate string
	err := tx.QueryRow(ctx, `SELECT waiting_for, candidate FROM node_mac_waits
		WHERE tenant_id = $1 AND node_id = $2 FOR UPDATE`, n.TenantID, n.ID).Scan(&waiting, &candidate)
	switch {
	case errors.Is(err, pgx.ErrNoRows) && len(n.MACs) > 0:
		return errs.New(errs.InvalidState, "node %s (%s) has its MACs already (%v): it waits for no MAC confirmation",
			n.ID, n.State, n.MACs)
	case errors.Is(err, pgx.ErrNoRows):
		return errs.New(errs.InvalidState, "node %s (%s) is not waiting for a MAC confirmation: its workflow asks for "+
			"one only after its machine PXE-booted under its product UUID (see `metal get %s`)", n.ID, n.State, n.ID)
	case err != nil:
		return errs.Wrap(errs.Unavailable, err, "read the MAC wait of node %s", n.ID)
	case waiting != from && waiting == WaitPXEDiscovery:
		return errs.New(errs.InvalidState, "node %s is still waiting for its machine to PXE-boot under its product UUID: "+
			"no candidate yet, so nothing to confirm", n.ID)
	case waiting != from:
		return errs.New(errs.InvalidState, "node %s waits for an operator to confirm a MAC (candidate %s): "+
			"`metal confirm-mac %s --mac …`", n.ID, candidate, n.ID)
	}
	return nil
}

// checkFree refuses a MAC never seen PXE-booting on the node's site, and
// one that another live node of the tenant has.
func checkFree(ctx context.Context, tx pgx.Tx, n Node, mac string) *errs.Error {
	var seen string
	err := tx.QueryRow(ctx, `SELECT mac FROM pxe_discoveries WHERE tenant_id = $1 AND site_id = $2 AND mac = $3 FOR UPDATE`,
		n.TenantID, n.SiteID, mac).Scan(&seen)
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.Invalid("mac", "MAC %s was never seen PXE-booting on site %s: `metal discovered --site %s` lists "+
			"the MACs that were", mac, n.SiteID, n.SiteID)
	}
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "read the PXE discovery of %s", mac)
	}
	var other string
	err = tx.QueryRow(ctx, `SELECT id FROM metal_nodes WHERE tenant_id = $1 AND id <> $2 AND $3 = ANY (macs)
		AND state <> 'retired' ORDER BY id LIMIT 1`, n.TenantID, n.ID, mac).Scan(&other)
	if err == nil {
		return errs.New(errs.AlreadyExists, "MAC %s belongs to node %s already: confirm the MAC of this node's machine "+
			"(its candidate in `metal discovered --site %s`)", mac, other, n.SiteID)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return errs.Wrap(errs.Unavailable, err, "look for the owner of %s", mac)
	}
	return nil
}

// ForgetMAC takes mac off the node's MACs: PXE discovery bound it and the
// machine that booted from it proved to be another. Safe to call twice.
func (s *Store) ForgetMAC(ctx context.Context, tenantID, nodeID, mac string) error {
	_, err := s.pool.Exec(ctx, `UPDATE metal_nodes SET macs = array_remove(macs, $3), updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND $3 = ANY (macs)`, tenantID, nodeID, mac)
	return dbError("store.ForgetMAC", err)
}
