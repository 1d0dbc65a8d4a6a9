package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
)

// NodeBMC is what metal.update changes of a node's BMC.
type NodeBMC struct {
	Address, Driver, CredentialsRef string
	TLS                             bmc.TLS
}

// UpdateNodeBMC saves a node's BMC settings if the node is still in state
// (compare-and-set: INVALID_STATE naming the state it is in otherwise). An
// address another live node of the site has is ALREADY_EXISTS naming it.
// Credentials the API sealed for this node alone (an unnamed secret) that
// the new settings replace are deleted in the same transaction.
func (s *Store) UpdateNodeBMC(ctx context.Context, tenantID, id string, state nodestate.State, b NodeBMC) error {
	const op = "store.UpdateNodeBMC"
	var moved bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var old string
		err := tx.QueryRow(ctx, `SELECT bmc_credentials_ref FROM metal_nodes WHERE tenant_id = $1 AND id = $2 AND state = $3 FOR UPDATE`,
			tenantID, id, state).Scan(&old)
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		moved = true
		if _, err := tx.Exec(ctx, `UPDATE metal_nodes SET bmc_address = $3, bmc_driver = $4, bmc_credentials_ref = $5,
			bmc_tls = $6, bmc_pending_ref = '', updated_at = now() WHERE tenant_id = $1 AND id = $2`,
			tenantID, id, b.Address, b.Driver, b.CredentialsRef, b.TLS); err != nil {
			return err
		}
		if secretID, ok := strings.CutPrefix(old, SecretRef(tenantID, "sec_")); ok && old != b.CredentialsRef {
			_, err = tx.Exec(ctx, `DELETE FROM secrets WHERE tenant_id = $1 AND id = $2 AND name IS NULL
				AND NOT EXISTS (SELECT 1 FROM metal_nodes WHERE bmc_credentials_ref = $3 AND state <> 'retired')`,
				tenantID, "sec_"+secretID, old)
		}
		return err
	})
	if _, unique, _ := violated(err); unique {
		n, gerr := s.GetNode(ctx, tenantID, id)
		if gerr != nil {
			return gerr
		}
		n.BMCAddress, n.ProductUUID = b.Address, ""
		return duplicateMachine(ctx, s.pool, n).WithOp(op)
	}
	if err != nil {
		return dbError(op, err)
	}
	if !moved {
		n, err := s.GetNode(ctx, tenantID, id)
		if err != nil {
			return err
		}
		return errs.New(errs.InvalidState, "node %s is %s now, not %s: its BMC settings were not changed", id, n.State, state).WithOp(op)
	}
	return nil
}

// DeleteUnnamedSecret deletes a secret the API sealed for one request (an
// unnamed one) that ended up unused, e.g. credentials metal.update was
// refused. A named secret, or one a node uses, is kept.
func (s *Store) DeleteUnnamedSecret(ctx context.Context, tenantID, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM secrets WHERE tenant_id = $1 AND id = $2 AND name IS NULL
		AND NOT EXISTS (SELECT 1 FROM metal_nodes WHERE bmc_credentials_ref = $3 OR bmc_pending_ref = $3)`, tenantID, id, SecretRef(tenantID, id))
	return dbError("store.DeleteUnnamedSecret", err)
}

// SetPendingBMCRef records the credentials reference metal.update is about
// to check on the node's BMC, so the node's site may resolve it during the
// check ("" clears it, after a refusal).
func (s *Store) SetPendingBMCRef(ctx context.Context, tenantID, id, ref string) error {
	_, err := s.pool.Exec(ctx, `UPDATE metal_nodes SET bmc_pending_ref = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, id, ref)
	return dbError("store.SetPendingBMCRef", err)
}
