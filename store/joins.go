package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

// JoinToken admits one agent of a node once: a discovery token per ramdisk
// boot, a provisioned token per installed OS. Only its hash is stored.
type JoinToken struct {
	ID, TenantID, SiteID, NodeID string
	Kind                         string // disc or prov
	WorkflowID                   string
	ExpiresAt                    time.Time
}

// CreateJoinToken stores a join token's hash.
func (s *Store) CreateJoinToken(ctx context.Context, t JoinToken, hash []byte) error {
	return createJoinToken(ctx, s.pool, t, hash)
}

// CreateJoinTokenTx stores a join token's hash in the caller's transaction:
// the token exists only if the caller commits.
func CreateJoinTokenTx(ctx context.Context, tx pgx.Tx, t JoinToken, hash []byte) error {
	return createJoinToken(ctx, tx, t, hash)
}

func createJoinToken(ctx context.Context, db pgxQuerier, t JoinToken, hash []byte) error {
	_, err := db.Exec(ctx, `
		INSERT INTO join_tokens (id, tenant_id, site_id, node_id, kind, hash, workflow_id, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		t.ID, t.TenantID, t.SiteID, t.NodeID, t.Kind, hash, t.WorkflowID, t.ExpiresAt)
	return dbError("store.CreateJoinToken", err)
}

// ConsumeJoinToken spends the token with hash, once, and records the
// certificate certify issues for it in the statement that spends it: the
// token is spent only with its certificate on record, so a join that fails
// between the two (the CA, the database) can be made again with the same
// token, and a join commits once. The token is read first, for certify; an
// unknown, used, expired one or one of another kind is refused before
// anything is issued, and (site not "") one for a node of another site when
// it would be spent, unspent. The refusals are UNAUTHENTICATED, saying
// which, never the token; certify's error is returned as it is.
func (s *Store) ConsumeJoinToken(ctx context.Context, hash []byte, kind, site string, now time.Time,
	certify func(JoinToken) (Certificate, error)) (JoinToken, error) {
	var t JoinToken
	var used *time.Time
	err := s.pool.QueryRow(ctx, "SELECT "+joinTokenColumns+", used_at FROM join_tokens WHERE hash = $1", hash).
		Scan(append(joinTokenFields(&t), &used)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return JoinToken{}, unknownJoinToken()
	}
	if err != nil {
		return JoinToken{}, dbError("store.ConsumeJoinToken", err)
	}
	if err := joinTokenRefused(t, kind, used, now); err != nil {
		return JoinToken{}, err
	}
	c, err := certify(t)
	if err != nil {
		return JoinToken{}, err
	}
	return s.consumeJoinToken(ctx, hash, kind, site, now, c)
}

const joinTokenColumns = "id, tenant_id, site_id, node_id, kind, workflow_id, expires_at"

func joinTokenFields(t *JoinToken) []any {
	return []any{&t.ID, &t.TenantID, &t.SiteID, &t.NodeID, &t.Kind, &t.WorkflowID, &t.ExpiresAt}
}

// consumeJoinToken spends the token and records c in the same statement,
// only if the token was spent.
func (s *Store) consumeJoinToken(ctx context.Context, hash []byte, kind, site string, now time.Time, c Certificate) (JoinToken, error) {
	const op = "store.ConsumeJoinToken"
	var t JoinToken
	var claimed bool
	var used *time.Time
	args := append([]any{hash, kind, now, site}, certificateArgs(c)...)
	err := s.pool.QueryRow(ctx, `
		WITH claimed AS (
			UPDATE join_tokens SET used_at = $3
			WHERE hash = $1 AND kind = $2 AND used_at IS NULL AND expires_at > $3 AND ($4 = '' OR site_id = $4)
			RETURNING id),
		recorded AS (`+insertCertificate(5)+` FROM claimed)
		SELECT `+joinTokenColumns+`, EXISTS (SELECT 1 FROM claimed), used_at
		FROM join_tokens WHERE hash = $1`, args...).Scan(append(joinTokenFields(&t), &claimed, &used)...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return JoinToken{}, unknownJoinToken()
	case err != nil:
		return JoinToken{}, dbError(op, err)
	case claimed:
		return t, nil
	}
	if err := joinTokenRefused(t, kind, used, now); err != nil {
		return JoinToken{}, err
	}
	// Unused, unexpired, its kind: the site differs.
	return JoinToken{}, errs.New(errs.Unauthenticated, "the token is for a node of another site; it stays usable through that site's agent").WithOp(op)
}

func unknownJoinToken() error {
	return errs.New(errs.Unauthenticated, "unknown join token").WithOp("store.ConsumeJoinToken")
}

// joinTokenRefused says why t (used at used, or not) admits no join of
// kind at now: another kind, used, expired; nil if none of those.
func joinTokenRefused(t JoinToken, kind string, used *time.Time, now time.Time) error {
	const op = "store.ConsumeJoinToken"
	switch {
	case t.Kind != kind:
		return errs.New(errs.Unauthenticated, "this join token is not a %s token", kind).WithOp(op)
	case used != nil:
		return errs.New(errs.Unauthenticated, "the join token was already used; each token admits one agent once").WithOp(op)
	case !t.ExpiresAt.After(now):
		return errs.New(errs.Unauthenticated, "the join token expired at %s", t.ExpiresAt.UTC().Format(time.RFC3339)).WithOp(op)
	}
	return nil
}

// Certificate is a certificate the CA issued, for audit and revocation.
type Certificate struct {
	Serial, TenantID, Role, Identity, SiteID, TokenID string
	PublicKey, CertPEM                                []byte
	ExpiresAt                                         time.Time
}

// RecordCertificate stores an issued certificate.
func (s *Store) RecordCertificate(ctx context.Context, c Certificate) error {
	_, err := s.pool.Exec(ctx, insertCertificate(1), certificateArgs(c)...)
	return dbError("store.RecordCertificate", err)
}

// insertCertificate inserts a certificate whose nine values are the
// statement's parameters $first… (certificateArgs), as INSERT … SELECT: a
// statement that records it only with another row appends FROM.
func insertCertificate(first int) string {
	ps := make([]string, 9)
	for i := range ps {
		ps[i] = "$" + strconv.Itoa(first+i)
	}
	return `INSERT INTO certificates (serial, tenant_id, role, identity, site_id, token_id, public_key, cert_pem, expires_at)
		SELECT ` + strings.Join(ps, ", ")
}

// certificateArgs are c's values for insertCertificate.
func certificateArgs(c Certificate) []any {
	return []any{c.Serial, c.TenantID, c.Role, c.Identity, c.SiteID, c.TokenID, c.PublicKey, c.CertPEM, c.ExpiresAt}
}

// CertificateRevoked reports whether the certificate with serial is revoked
// or unknown.
func (s *Store) CertificateRevoked(ctx context.Context, serial string) (bool, error) {
	var revoked bool
	err := s.pool.QueryRow(ctx, `SELECT revoked_at IS NOT NULL FROM certificates WHERE serial = $1`, serial).Scan(&revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	return revoked, dbError("store.CertificateRevoked", err)
}

// RevokeIdentity revokes every certificate of identity (a retired node's).
func (s *Store) RevokeIdentity(ctx context.Context, tenantID, identity string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE certificates SET revoked_at = now()
		WHERE tenant_id = $1 AND identity = $2 AND revoked_at IS NULL`, tenantID, identity)
	if err != nil {
		return 0, dbError("store.RevokeIdentity", err)
	}
	_, err = s.pool.Exec(ctx, `UPDATE join_tokens SET used_at = COALESCE(used_at, now())
		WHERE tenant_id = $1 AND node_id = $2`, tenantID, identity)
	return tag.RowsAffected(), dbError("store.RevokeIdentity", err)
}
