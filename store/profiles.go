package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

const profileColumns = "tenant_id, id, version, document, visibility, created_at"

func scanProfile(row pgx.Row) (Profile, error) {
	var x Profile
	err := row.Scan(&x.TenantID, &x.ID, &x.Version, &x.Document, &x.Visibility, &x.CreatedAt)
	return x, err
}

// CreateProfile stores one version of a profile; ALREADY_EXISTS when the tenant
// has that id and version.
func (s *Store) CreateProfile(ctx context.Context, p Profile) error {
	const op = "store.CreateProfile"
	_, err := s.pool.Exec(ctx, `
		INSERT INTO profiles (tenant_id, id, version, document, visibility) VALUES ($1, $2, $3, $4, $5)`,
		p.TenantID, p.ID, p.Version, p.Document, p.Visibility)
	switch constraint, unique, fk := violated(err); {
	case unique && constraint == "profiles_pkey":
		return errs.New(errs.AlreadyExists, "profile %q version %d already exists; create a new version", p.ID, p.Version).WithOp(op)
	case fk && constraint == "profiles_tenant_fk":
		return notFound("tenant", p.TenantID).WithOp(op)
	}
	return dbError(op, err)
}

// GetProfile returns version of the tenant's profile id, the newest when version is 0.
func (s *Store) GetProfile(ctx context.Context, tenantID, id string, version int) (Profile, error) {
	p, err := scanProfile(s.pool.QueryRow(ctx, "SELECT "+profileColumns+` FROM profiles
		WHERE tenant_id = $1 AND id = $2 AND ($3 = 0 OR version = $3)
		ORDER BY version DESC LIMIT 1`, tenantID, id, version))
	if errors.Is(err, pgx.ErrNoRows) {
		if version == 0 {
			return Profile{}, notFound("profile", id).WithOp("store.GetProfile")
		}
		return Profile{}, errs.New(errs.NotFound, "profile %q version %d not found", id, version).WithOp("store.GetProfile")
	}
	return p, dbError("store.GetProfile", err)
}

// ListProfiles returns every version of the tenant's profiles, by id then version.
func (s *Store) ListProfiles(ctx context.Context, tenantID string) ([]Profile, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+profileColumns+" FROM profiles WHERE tenant_id = $1 ORDER BY id, version", tenantID)
	if err != nil {
		return nil, dbError("store.ListProfiles", err)
	}
	ps, err := collect(rows, scanProfile)
	return ps, dbError("store.ListProfiles", err)
}
