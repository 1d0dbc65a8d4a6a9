package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
)

const siteTokenColumns = "id, tenant_id, site_id, COALESCE(key, ''), expires_at, created_at, used_at"

func scanSiteToken(row pgx.Row) (SiteToken, error) {
	var x SiteToken
	err := row.Scan(&x.ID, &x.TenantID, &x.SiteID, &x.Key, &x.ExpiresAt, &x.CreatedAt, &x.UsedAt)
	return x, err
}

// CreateSiteToken records a site token by the hash of its secret (the secret is
// never stored). With a Key it is idempotent within the tenant like CreateSite: the
// existing token comes back with created false and hash is ignored, so the caller
// cannot hand out a second secret for it. The site must exist in the tenant.
func (s *Store) CreateSiteToken(ctx context.Context, t SiteToken, hash []byte) (SiteToken, bool, error) {
	const op = "store.CreateSiteToken"
	if t.ID == "" {
		t.ID = ids.New(ids.SiteToken)
	}
	tok, err := scanSiteToken(s.pool.QueryRow(ctx, `
		INSERT INTO site_tokens (id, tenant_id, site_id, key, hash, expires_at)
		VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6)
		ON CONFLICT (tenant_id, key) DO NOTHING
		RETURNING `+siteTokenColumns, t.ID, t.TenantID, t.SiteID, t.Key, hash, t.ExpiresAt))
	if err == nil {
		return tok, true, nil
	}
	if constraint, _, fk := violated(err); fk && constraint == "site_tokens_site_fk" {
		return SiteToken{}, false, notFound("site", t.SiteID).WithOp(op)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return SiteToken{}, false, dbError(op, err)
	}
	tok, err = scanSiteToken(s.pool.QueryRow(ctx,
		"SELECT "+siteTokenColumns+" FROM site_tokens WHERE tenant_id = $1 AND key = $2", t.TenantID, t.Key))
	return tok, false, dbError(op, err)
}

// ConsumeSiteToken uses up the token with this hash at now, once, and
// records the certificate certify issues for it in the statement that
// spends it (see ConsumeJoinToken). An unknown, used or expired token is
// UNAUTHENTICATED, saying which, before anything is issued.
func (s *Store) ConsumeSiteToken(ctx context.Context, hash []byte, now time.Time,
	certify func(SiteToken) (Certificate, error)) (SiteToken, error) {
	tok, err := s.readSiteToken(ctx, hash)
	if err != nil {
		return SiteToken{}, err
	}
	if tok.UsedAt != nil || !tok.ExpiresAt.After(now) {
		return SiteToken{}, siteTokenRefused(tok)
	}
	c, err := certify(tok)
	if err != nil {
		return SiteToken{}, err
	}
	return s.consumeSiteToken(ctx, hash, now, c)
}

// consumeSiteToken spends the token and records c in the same statement,
// only if the token was spent.
func (s *Store) consumeSiteToken(ctx context.Context, hash []byte, now time.Time, c Certificate) (SiteToken, error) {
	const op = "store.ConsumeSiteToken"
	args := append([]any{hash, now}, certificateArgs(c)...)
	tok, err := scanSiteToken(s.pool.QueryRow(ctx, `
		WITH claimed AS (
			UPDATE site_tokens SET used_at = $2
			WHERE hash = $1 AND used_at IS NULL AND expires_at > $2
			RETURNING *),
		recorded AS (`+insertCertificate(3)+` FROM claimed)
		SELECT `+siteTokenColumns+` FROM claimed`, args...))
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return SiteToken{}, dbError(op, err)
	}
	// Tell why. A concurrent consumer that won has committed by now.
	if tok, err = s.readSiteToken(ctx, hash); err != nil {
		return SiteToken{}, err
	}
	return SiteToken{}, siteTokenRefused(tok)
}

// readSiteToken reads the token with hash, used or not; an unknown one is
// UNAUTHENTICATED.
func (s *Store) readSiteToken(ctx context.Context, hash []byte) (SiteToken, error) {
	tok, err := scanSiteToken(s.pool.QueryRow(ctx, "SELECT "+siteTokenColumns+" FROM site_tokens WHERE hash = $1", hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return SiteToken{}, errs.New(errs.Unauthenticated, "unknown site token: create one with site-tokens create").WithOp("store.ConsumeSiteToken")
	}
	return tok, dbError("store.ConsumeSiteToken", err)
}

// siteTokenRefused says why tok, which admits no site, does not: used, else
// expired.
func siteTokenRefused(tok SiteToken) error {
	const op = "store.ConsumeSiteToken"
	if tok.UsedAt != nil {
		return errs.New(errs.Unauthenticated,
			"site token %s was already used at %s; site tokens are single-use, create another", tok.ID,
			tok.UsedAt.UTC().Format(time.RFC3339)).WithOp(op)
	}
	return errs.New(errs.Unauthenticated, "site token %s expired at %s; create another", tok.ID,
		tok.ExpiresAt.UTC().Format(time.RFC3339)).WithOp(op)
}

// PeekSiteToken returns the site token with hash if it is unused and
// unexpired at now, without using it; ok is false otherwise. The JoinService
// checks what the join asks of the token's site with it before consuming
// the token, so a refused request does not cost the operator a new token.
func (s *Store) PeekSiteToken(ctx context.Context, hash []byte, now time.Time) (tok SiteToken, ok bool, err error) {
	tok, err = scanSiteToken(s.pool.QueryRow(ctx, "SELECT "+siteTokenColumns+
		" FROM site_tokens WHERE hash = $1 AND used_at IS NULL AND expires_at > $2", hash, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return SiteToken{}, false, nil
	}
	return tok, err == nil, dbError("store.PeekSiteToken", err)
}
