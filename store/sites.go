package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/ids"
)

const siteColumns = "id, tenant_id, kind, region, COALESCE(key, ''), created_at"

func scanSite(row pgx.Row) (Site, error) {
	var x Site
	err := row.Scan(&x.ID, &x.TenantID, &x.Kind, &x.Region, &x.Key, &x.CreatedAt)
	return x, err
}

// CreateSite creates a site (a new id unless s.ID is set) and reports whether it
// did. With a Key, creation is idempotent within the tenant: when the key is taken,
// even by a concurrent call, the existing site comes back with created false,
// whatever its other fields are (the caller may compare them).
func (s *Store) CreateSite(ctx context.Context, x Site) (Site, bool, error) {
	const op = "store.CreateSite"
	if x.ID == "" {
		x.ID = ids.New(ids.Site)
	}
	site, err := scanSite(s.pool.QueryRow(ctx, `
		INSERT INTO sites (id, tenant_id, kind, region, key) VALUES ($1, $2, $3, $4, NULLIF($5, ''))
		ON CONFLICT (tenant_id, key) DO NOTHING
		RETURNING `+siteColumns, x.ID, x.TenantID, x.Kind, x.Region, x.Key))
	if err == nil {
		return site, true, nil
	}
	if constraint, _, fk := violated(err); fk && constraint == "sites_tenant_fk" {
		return Site{}, false, notFound("tenant", x.TenantID).WithOp(op)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Site{}, false, dbError(op, err)
	}
	// The key was taken: the conflicting insert has committed, so this sees it.
	site, err = scanSite(s.pool.QueryRow(ctx,
		"SELECT "+siteColumns+" FROM sites WHERE tenant_id = $1 AND key = $2", x.TenantID, x.Key))
	return site, false, dbError(op, err)
}

// GetSite returns the tenant's site id.
func (s *Store) GetSite(ctx context.Context, tenantID, id string) (Site, error) {
	site, err := scanSite(s.pool.QueryRow(ctx,
		"SELECT "+siteColumns+" FROM sites WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Site{}, notFound("site", id).WithOp("store.GetSite")
	}
	return site, dbError("store.GetSite", err)
}

// ListSites returns the tenant's sites, oldest first.
func (s *Store) ListSites(ctx context.Context, tenantID string) ([]Site, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+siteColumns+" FROM sites WHERE tenant_id = $1 ORDER BY id", tenantID)
	if err != nil {
		return nil, dbError("store.ListSites", err)
	}
	sites, err := collect(rows, scanSite)
	return sites, dbError("store.ListSites", err)
}
