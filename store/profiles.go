package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

const profileColumns = "tenant_id, id, version, document, visibility, created_at"

// Public is the visibility of a profile every tenant may read and deploy;
// anything else (private, or "" from before visibility was enforced) is its
// owner's alone.
const Public = "public"

// readable is the tenant isolation of profiles, for a query whose $1 is
// the caller's tenant: the tenant's own profiles, and
// another tenant's public one when the caller has no profile of that id (its
// own shadows it, so a tenant's deploys never change owner behind its back).
const readable = `(tenant_id = $1 OR (visibility = 'public' AND NOT EXISTS (
	SELECT 1 FROM profiles own WHERE own.tenant_id = $1 AND own.id = profiles.id)))`

func scanProfile(row pgx.Row) (Profile, error) {
	var x Profile
	err := row.Scan(&x.TenantID, &x.ID, &x.Version, &x.Document, &x.Visibility, &x.CreatedAt)
	return x, err
}

// CreateProfile stores one version of a profile; ALREADY_EXISTS when the tenant
// has that id and version, had it and deleted it (a version number names
// one document forever), or when it is public and another tenant's public
// profile has the id.
func (s *Store) CreateProfile(ctx context.Context, p Profile) error {
	const op = "store.CreateProfile"
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if p.Visibility == Public {
			if err := claimPublicID(ctx, tx, p.TenantID, p.ID); err != nil {
				return err
			}
		}
		if err := versionNeverDeleted(ctx, tx, p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO profiles (tenant_id, id, version, document, visibility) VALUES ($1, $2, $3, $4, $5)`,
			p.TenantID, p.ID, p.Version, p.Document, p.Visibility)
		return err
	})
	switch constraint, unique, fk := violated(err); {
	case unique && constraint == "profiles_pkey":
		return errs.New(errs.AlreadyExists, "profile %q version %d already exists; versions never change, create a new version", p.ID, p.Version).WithOp(op)
	case fk && constraint == "profiles_tenant_fk":
		return notFound("tenant", p.TenantID).WithOp(op)
	}
	return dbError(op, err)
}

// versionNeverDeleted is ALREADY_EXISTS when the tenant deleted version of
// profile id, naming the next version no document ever had.
func versionNeverDeleted(ctx context.Context, tx pgx.Tx, p Profile) error {
	var deleted *time.Time
	var next int
	err := tx.QueryRow(ctx, `SELECT
		(SELECT deleted_at FROM deleted_profile_versions WHERE tenant_id = $1 AND id = $2 AND version = $3),
		GREATEST(
			(SELECT coalesce(max(version), 0) FROM profiles WHERE tenant_id = $1 AND id = $2),
			(SELECT coalesce(max(version), 0) FROM deleted_profile_versions WHERE tenant_id = $1 AND id = $2)) + 1`,
		p.TenantID, p.ID, p.Version).Scan(&deleted, &next)
	if err == nil && deleted != nil {
		return errs.New(errs.AlreadyExists, "profile %q version %d was deleted at %s, and a version number names one document forever; create version %d",
			p.ID, p.Version, deleted.UTC().Format(time.RFC3339), next)
	}
	return err
}

// claimPublicID makes sure no other tenant's public profile has the id, so
// that an id names one public profile: every check of it and the change it
// guards run under one lock.
func claimPublicID(ctx context.Context, tx pgx.Tx, tenantID, id string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('profiles/public/' || $1))`, id); err != nil {
		return err
	}
	var taken bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM profiles
		WHERE id = $2 AND tenant_id <> $1 AND visibility = 'public')`, tenantID, id).Scan(&taken)
	if err == nil && taken {
		return errs.New(errs.AlreadyExists, "another tenant's public profile is named %q; pick another id", id)
	}
	return err
}

// GetProfile returns version of profile id (the newest when version is 0)
// as tenantID may read it: its own, else another tenant's public one.
func (s *Store) GetProfile(ctx context.Context, tenantID, id string, version int) (Profile, error) {
	p, err := scanProfile(s.pool.QueryRow(ctx, "SELECT "+profileColumns+` FROM profiles
		WHERE id = $2 AND ($3 = 0 OR version = $3) AND `+readable+`
		ORDER BY version DESC LIMIT 1`, tenantID, id, version))
	if errors.Is(err, pgx.ErrNoRows) {
		return Profile{}, profileNotFound(id, version).WithOp("store.GetProfile")
	}
	return p, dbError("store.GetProfile", err)
}

// GetProfileOf returns version of owner's profile id as tenantID may read
// it (owner is tenantID, or the profile is public), whatever profile of
// that id tenantID reads now: a deploy runs the profile its check read,
// not one that shadows it since.
func (s *Store) GetProfileOf(ctx context.Context, tenantID, owner, id string, version int) (Profile, error) {
	p, err := scanProfile(s.pool.QueryRow(ctx, "SELECT "+profileColumns+` FROM profiles
		WHERE tenant_id = $4 AND id = $2 AND version = $3 AND (tenant_id = $1 OR visibility = 'public')`,
		tenantID, id, version, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return Profile{}, profileNotFound(id, version).WithOp("store.GetProfileOf")
	}
	return p, dbError("store.GetProfileOf", err)
}

func profileNotFound(id string, version int) *errs.Error {
	if version == 0 {
		return notFound("profile", id)
	}
	return errs.New(errs.NotFound, "profile %q version %d not found", id, version)
}

// ListProfiles returns every version of the profiles tenantID may read (its
// own and other tenants' public ones), by id, then owner, then version.
func (s *Store) ListProfiles(ctx context.Context, tenantID string) ([]Profile, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+profileColumns+" FROM profiles WHERE "+
		readable+" ORDER BY id, tenant_id, version", tenantID)
	if err != nil {
		return nil, dbError("store.ListProfiles", err)
	}
	ps, err := collect(rows, scanProfile)
	return ps, dbError("store.ListProfiles", err)
}

// SetProfileVisibility sets the visibility of version of the tenant's
// profile id (every version when version is 0) and returns the versions
// changed. Only the owner may: another tenant's public profile is
// PERMISSION_DENIED (it is readable, so saying so tells nothing new), a
// private or missing one NOT_FOUND. Making it public is ALREADY_EXISTS when
// another tenant's public profile has the id.
func (s *Store) SetProfileVisibility(ctx context.Context, tenantID, id string, version int, visibility string) ([]Profile, error) {
	const op = "store.SetProfileVisibility"
	var out []Profile
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if visibility == Public {
			if err := claimPublicID(ctx, tx, tenantID, id); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `UPDATE profiles SET visibility = $4
			WHERE tenant_id = $1 AND id = $2 AND ($3 = 0 OR version = $3)
			RETURNING `+profileColumns, tenantID, id, version, visibility)
		if err != nil {
			return err
		}
		if out, err = collect(rows, scanProfile); err != nil || len(out) > 0 {
			return err
		}
		return notOwner(ctx, tx, tenantID, id, version)
	})
	slices.SortFunc(out, func(a, b Profile) int { return a.Version - b.Version })
	return out, dbError(op, err)
}

// DeleteProfile deletes version of the tenant's profile id (every version
// when version is 0) and returns the versions deleted, oldest first; their
// numbers stay taken (CreateProfile). It is
// INVALID_STATE naming the nodes deployed with it, and refused to another
// tenant as SetProfileVisibility is. Whether a workflow runs it is the
// caller's to check (Temporal knows, not the database).
func (s *Store) DeleteProfile(ctx context.Context, tenantID, id string, version int) ([]int, error) {
	const op = "store.DeleteProfile"
	var versions []int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT version FROM profiles
			WHERE tenant_id = $1 AND id = $2 AND ($3 = 0 OR version = $3) ORDER BY version FOR UPDATE`, tenantID, id, version)
		if err != nil {
			return err
		}
		if versions, err = pgx.CollectRows(rows, pgx.RowTo[int]); err != nil {
			return err
		}
		if len(versions) == 0 {
			return notOwner(ctx, tx, tenantID, id, version)
		}
		if err := notDeployed(ctx, tx, tenantID, id, version); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `WITH gone AS (
				DELETE FROM profiles WHERE tenant_id = $1 AND id = $2 AND ($3 = 0 OR version = $3)
				RETURNING tenant_id, id, version)
			INSERT INTO deleted_profile_versions (tenant_id, id, version) SELECT tenant_id, id, version FROM gone
			ON CONFLICT DO NOTHING`, tenantID, id, version)
		return err
	})
	return versions, dbError(op, err)
}

// notOwner is the error for a change to a profile the tenant does not own:
// PERMISSION_DENIED when the tenant can read it (another tenant's public
// profile), NOT_FOUND otherwise, as for a profile that does not exist.
func notOwner(ctx context.Context, tx pgx.Tx, tenantID, id string, version int) error {
	var owner string
	err := tx.QueryRow(ctx, `SELECT tenant_id FROM profiles
		WHERE id = $2 AND ($3 = 0 OR version = $3) AND `+readable+` LIMIT 1`, tenantID, id, version).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return profileNotFound(id, version)
	}
	if err != nil {
		return err
	}
	return errs.New(errs.PermissionDenied, "profile %q is tenant %s's public profile: only its owner may change or delete it", id, owner)
}

// maxNamed bounds the nodes an error names.
const maxNamed = 10

// notDeployed is INVALID_STATE naming the nodes deployed with version of
// tenantID's profile id (any version when 0): the owner's own nodes by id,
// other tenants' (deployed while it was public) only counted. A node of
// another tenant with a profile of the same id of its own runs that one.
func notDeployed(ctx context.Context, tx pgx.Tx, tenantID, id string, version int) error {
	rows, err := tx.Query(ctx, `SELECT n.tenant_id = $1, n.id FROM metal_nodes n
		WHERE n.profile_id = $2 AND ($3 = 0 OR n.profile_version = $3) AND (n.tenant_id = $1 OR NOT EXISTS (
			SELECT 1 FROM profiles own WHERE own.tenant_id = n.tenant_id AND own.id = $2))
		ORDER BY n.id`, tenantID, id, version)
	if err != nil {
		return err
	}
	type use struct {
		own  bool
		node string
	}
	uses, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (use, error) {
		var u use
		return u, r.Scan(&u.own, &u.node)
	})
	if err != nil || len(uses) == 0 {
		return err
	}
	var mine []string
	others := 0
	for _, u := range uses {
		if u.own {
			mine = append(mine, u.node)
		} else {
			others++
		}
	}
	return errs.New(errs.InvalidState, "profile %q %s is deployed on %s; undeploy them first", id, versionText(version), nodesText(mine, others))
}

// versionText names version for a message: "version 2" or "(every version)".
func versionText(version int) string {
	if version == 0 {
		return "(every version)"
	}
	return fmt.Sprintf("version %d", version)
}

// nodesText names the caller's nodes (at most maxNamed) and counts others'.
func nodesText(mine []string, others int) string {
	var parts []string
	if len(mine) > maxNamed {
		parts = append(parts, strings.Join(mine[:maxNamed], ", ")+fmt.Sprintf(" and %d more", len(mine)-maxNamed))
	} else if len(mine) > 0 {
		parts = append(parts, strings.Join(mine, ", "))
	}
	if others > 0 {
		parts = append(parts, fmt.Sprintf("%d node(s) of other tenants", others))
	}
	return strings.Join(parts, " and ")
}
