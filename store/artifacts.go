package store

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

// MaxArtifactBytes bounds one published artifact (an autoinstall ISO of user
// data, not an OS image: those go through the catalog). The table checks it
// too.
const MaxArtifactBytes = 64 << 20

// artifactIDs encodes an artifact's 32 random bytes: lowercase base32, no
// padding (52 characters), safe in a URL path.
var artifactIDs = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewArtifactID returns a fresh artifact id: 32 random bytes, what keeps
// the URL that serves it unguessable.
func NewArtifactID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return artifactIDs.EncodeToString(b[:])
}

// ValidArtifactID reports whether id has NewArtifactID's form.
func ValidArtifactID(id string) bool {
	b, err := artifactIDs.DecodeString(id)
	return err == nil && len(b) == 32
}

// Artifact is a per-node file a control-plane step published, served by the
// node's site at an unguessable id until it expires.
type Artifact struct {
	ID, TenantID, SiteID, NodeID, Name string
	SHA256                             string // hex of the bytes
	ExpiresAt                          time.Time
}

// PublishArtifactTx stores an artifact in the caller's transaction, deletes
// a few that expired by now, and returns where the artifact's site serves
// artifacts (its boot listener's base URL). INVALID_STATE when the site's
// agent has not said where it serves them yet.
func PublishArtifactTx(ctx context.Context, tx pgx.Tx, a Artifact, data []byte, now time.Time) (string, error) {
	const op = "store.PublishArtifact"
	if len(data) > MaxArtifactBytes {
		return "", errs.Invalid("data", "an artifact holds at most %d bytes, got %d", MaxArtifactBytes, len(data)).WithOp(op)
	}
	var base string
	err := tx.QueryRow(ctx, `SELECT artifacts_url FROM sites WHERE tenant_id = $1 AND id = $2`, a.TenantID, a.SiteID).Scan(&base)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", notFound("site", a.SiteID).WithOp(op)
	}
	if err != nil {
		return "", dbError(op, err)
	}
	if base == "" {
		return "", errs.New(errs.InvalidState, "site %s's agent has not said where it serves artifacts; start its bcd site (this version or later) and try again", a.SiteID).WithOp(op)
	}
	// Expired files go as new ones come: a few at a time, skipping rows
	// another publish is deleting, so no publish waits on another.
	if _, err := tx.Exec(ctx, `DELETE FROM artifacts WHERE id IN (
		SELECT id FROM artifacts WHERE expires_at <= $1 LIMIT 16 FOR UPDATE SKIP LOCKED)`, now); err != nil {
		return "", dbError(op, err)
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO artifacts (id, tenant_id, site_id, node_id, name, sha256, bytes, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		a.ID, a.TenantID, a.SiteID, a.NodeID, a.Name, a.SHA256, data, a.ExpiresAt)
	return base, dbError(op, err)
}

// SiteArtifact returns an artifact of site with its bytes. Unknown, of
// another site and expired are all NOT_FOUND, alike, so a site learns
// nothing of other sites' ids.
func (s *Store) SiteArtifact(ctx context.Context, siteID, id string, now time.Time) (Artifact, []byte, error) {
	const op = "store.SiteArtifact"
	a := Artifact{ID: id, SiteID: siteID}
	var data []byte
	err := s.pool.QueryRow(ctx, `
		SELECT tenant_id, node_id, name, sha256, expires_at, bytes FROM artifacts
		WHERE id = $1 AND site_id = $2 AND expires_at > $3`, id, siteID, now).
		Scan(&a.TenantID, &a.NodeID, &a.Name, &a.SHA256, &a.ExpiresAt, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return Artifact{}, nil, notFound("artifact", id).WithOp(op)
	}
	return a, data, dbError(op, err)
}

// SetArtifactsURL records where site's agent serves artifacts (its boot
// listener, http://host:port), said at each start.
func (s *Store) SetArtifactsURL(ctx context.Context, siteID, url string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE sites SET artifacts_url = $2 WHERE id = $1`, siteID, url)
	if err == nil && tag.RowsAffected() == 0 {
		return notFound("site", siteID).WithOp("store.SetArtifactsURL")
	}
	return dbError("store.SetArtifactsURL", err)
}

// SiteServeHosts returns the names and addresses site's agent declared
// (any tenant's site: the caller is that site's agent).
func (s *Store) SiteServeHosts(ctx context.Context, siteID string) ([]string, error) {
	var hosts []string
	err := s.pool.QueryRow(ctx, `SELECT serve_hosts FROM sites WHERE id = $1`, siteID).Scan(&hosts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("site", siteID).WithOp("store.SiteServeHosts")
	}
	return hosts, dbError("store.SiteServeHosts", err)
}

// NodeSiteTx returns the site of the tenant's node, read in the caller's
// transaction: what a step is told of its node is checked, not trusted.
func NodeSiteTx(ctx context.Context, tx pgx.Tx, tenantID, nodeID string) (string, error) {
	var site string
	err := tx.QueryRow(ctx, `SELECT site_id FROM metal_nodes WHERE tenant_id = $1 AND id = $2`, tenantID, nodeID).Scan(&site)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", notFound("node", nodeID).WithOp("store.NodeSite")
	}
	return site, dbError("store.NodeSite", err)
}
