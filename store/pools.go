package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/ids"
)

const poolColumns = "id, tenant_id, site_id, class, agent, policy, created_at"

func scanPool(row pgx.Row) (Pool, error) {
	var x Pool
	err := row.Scan(&x.ID, &x.TenantID, &x.SiteID, &x.Class, &x.Agent, &x.Policy, &x.CreatedAt)
	return x, err
}

// CreatePool creates a pool (a new id unless p.ID is set) on a site of the same
// tenant; NOT_FOUND names the site when the tenant has no such site.
func (s *Store) CreatePool(ctx context.Context, p Pool) (Pool, error) {
	const op = "store.CreatePool"
	if p.ID == "" {
		p.ID = ids.New(ids.Pool)
	}
	pool, err := scanPool(s.pool.QueryRow(ctx, `
		INSERT INTO pools (id, tenant_id, site_id, class, agent, policy) VALUES ($1, $2, $3, $4, $5, $6)
		RETURNING `+poolColumns, p.ID, p.TenantID, p.SiteID, p.Class, p.Agent, p.Policy))
	if constraint, _, fk := violated(err); fk && constraint == "pools_site_fk" {
		return Pool{}, notFound("site", p.SiteID).WithOp(op)
	}
	return pool, dbError(op, err)
}

// GetPool returns the tenant's pool id.
func (s *Store) GetPool(ctx context.Context, tenantID, id string) (Pool, error) {
	pool, err := scanPool(s.pool.QueryRow(ctx,
		"SELECT "+poolColumns+" FROM pools WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Pool{}, notFound("pool", id).WithOp("store.GetPool")
	}
	return pool, dbError("store.GetPool", err)
}

// ListPools returns the tenant's pools on siteID ("" for all sites), oldest first.
func (s *Store) ListPools(ctx context.Context, tenantID, siteID string) ([]Pool, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+poolColumns+` FROM pools
		WHERE tenant_id = $1 AND ($2 = '' OR site_id = $2) ORDER BY id`, tenantID, siteID)
	if err != nil {
		return nil, dbError("store.ListPools", err)
	}
	pools, err := collect(rows, scanPool)
	return pools, dbError("store.ListPools", err)
}
