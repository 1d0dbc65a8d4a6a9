package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
)

const siteColumns = "id, tenant_id, kind, region, COALESCE(key, ''), loopback_lab, serve_hosts, created_at, bmc_drivers"

func scanSite(row pgx.Row) (Site, error) {
	var x Site
	err := row.Scan(&x.ID, &x.TenantID, &x.Kind, &x.Region, &x.Key, &x.LoopbackLab, &x.ServeHosts, &x.CreatedAt, &x.BMCDrivers)
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
		INSERT INTO sites (id, tenant_id, kind, region, key, loopback_lab) VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6)
		ON CONFLICT (tenant_id, key) DO NOTHING
		RETURNING `+siteColumns, x.ID, x.TenantID, x.Kind, x.Region, x.Key, x.LoopbackLab))
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

// serveHostsLock is the pg_advisory_xact_lock key that serializes declarations
// of serve hosts, so two sites cannot claim one name at once ("bc-serve").
const serveHostsLock int64 = 0x62632d7365727665

// DeclareServeHosts records hosts as the names the site's agent may get
// serving certificates for, replacing what it declared before. A name in
// exclusive that another site (of any tenant) declared is PERMISSION_DENIED,
// naming the name but not the other site: a site's names are its own, so its
// certificate cannot stand in for another site's relay.
func (s *Store) DeclareServeHosts(ctx context.Context, tenantID, siteID string, hosts, exclusive []string) error {
	const op = "store.DeclareServeHosts"
	if hosts == nil {
		hosts = []string{} // the column is NOT NULL
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", serveHostsLock); err != nil {
			return dbError(op, err)
		}
		var taken string
		err := tx.QueryRow(ctx, `SELECT h FROM sites, unnest(serve_hosts) AS h
			WHERE id <> $1 AND h = ANY($2) LIMIT 1`, siteID, exclusive).Scan(&taken)
		if err == nil {
			return errs.New(errs.PermissionDenied,
				"serve host %q is declared by another site; a site's serving names are its own (pick another name)", taken).WithOp(op)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return dbError(op, err)
		}
		tag, err := tx.Exec(ctx, "UPDATE sites SET serve_hosts = $3 WHERE tenant_id = $1 AND id = $2", tenantID, siteID, hosts)
		if err != nil {
			return dbError(op, err)
		}
		if tag.RowsAffected() == 0 {
			return notFound("site", siteID).WithOp(op)
		}
		return nil
	})
}

// SetSiteBMCDrivers records the BMC drivers the agent of site siteID (an
// id its certificate proves) announced.
func (s *Store) SetSiteBMCDrivers(ctx context.Context, siteID string, drivers []string) error {
	tag, err := s.pool.Exec(ctx, "UPDATE sites SET bmc_drivers = $2 WHERE id = $1", siteID, nonNil(drivers))
	if err == nil && tag.RowsAffected() == 0 {
		return notFound("site", siteID).WithOp("store.SetSiteBMCDrivers")
	}
	return dbError("store.SetSiteBMCDrivers", err)
}
