package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
)

// EnsureTenant creates tenant id unless it exists.
func (s *Store) EnsureTenant(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, "INSERT INTO tenants (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", id)
	return dbError("store.EnsureTenant", err)
}

// CreateTenant creates tenant id; ALREADY_EXISTS if it exists.
func (s *Store) CreateTenant(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, "INSERT INTO tenants (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", id)
	if err != nil {
		return dbError("store.CreateTenant", err)
	}
	if tag.RowsAffected() == 0 {
		return errs.New(errs.AlreadyExists, "tenant %q already exists", id).WithOp("store.CreateTenant")
	}
	return nil
}

// TenantExists reports whether tenant id exists.
func (s *Store) TenantExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)", id).Scan(&ok)
	return ok, dbError("store.TenantExists", err)
}

// CreateAPIToken records an API token of the tenant by the hash of its secret
// (the secret itself is never stored) and returns the token's id.
func (s *Store) CreateAPIToken(ctx context.Context, tenantID, name string, hash []byte) (string, error) {
	const op = "store.CreateAPIToken"
	id := ids.New(ids.APIToken)
	_, err := s.pool.Exec(ctx, "INSERT INTO api_tokens (id, tenant_id, name, hash) VALUES ($1, $2, $3, $4)",
		id, tenantID, name, hash)
	switch constraint, unique, fk := violated(err); {
	case fk && constraint == "api_tokens_tenant_fk":
		return "", notFound("tenant", tenantID).WithOp(op)
	case unique && constraint == "api_tokens_hash_key":
		return "", errs.New(errs.AlreadyExists, "an API token with this secret exists; make a new secret").WithOp(op)
	}
	if err != nil {
		return "", dbError(op, err)
	}
	return id, nil
}

// LookupAPIToken finds the live token with this hash; NOT_FOUND if there is none
// or it was revoked.
func (s *Store) LookupAPIToken(ctx context.Context, hash []byte) (tenantID, tokenID string, err error) {
	err = s.pool.QueryRow(ctx, "SELECT tenant_id, id FROM api_tokens WHERE hash = $1 AND revoked_at IS NULL", hash).
		Scan(&tenantID, &tokenID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", errs.New(errs.NotFound, "no such API token, or it was revoked").WithOp("store.LookupAPIToken")
	}
	if err != nil {
		return "", "", dbError("store.LookupAPIToken", err)
	}
	return tenantID, tokenID, nil
}

// APITokenTenant returns the tenant of token id while it is not revoked: a
// session made from the token (the Web UI's) lives no longer than the token.
func (s *Store) APITokenTenant(ctx context.Context, id string) (string, error) {
	var tenantID string
	err := s.pool.QueryRow(ctx, "SELECT tenant_id FROM api_tokens WHERE id = $1 AND revoked_at IS NULL", id).Scan(&tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errs.New(errs.NotFound, "no such API token, or it was revoked").WithOp("store.APITokenTenant")
	}
	if err != nil {
		return "", dbError("store.APITokenTenant", err)
	}
	return tenantID, nil
}

// RevokeAPIToken revokes the tenant's token id; revoking twice is fine.
func (s *Store) RevokeAPIToken(ctx context.Context, tenantID, id string) error {
	tag, err := s.pool.Exec(ctx,
		"UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE tenant_id = $1 AND id = $2", tenantID, id)
	if err != nil {
		return dbError("store.RevokeAPIToken", err)
	}
	if tag.RowsAffected() == 0 {
		return notFound("API token", id).WithOp("store.RevokeAPIToken")
	}
	return nil
}
