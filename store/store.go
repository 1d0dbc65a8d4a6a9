// Package store owns better-compute's PostgreSQL data: the connection pool, the
// schema (migrations embedded in the binary and applied under an advisory lock),
// and typed, tenant-scoped reads and writes of tenants, API tokens, sites, site
// tokens, pools, images and provision profiles. Another tenant's object is
// NOT_FOUND, never its contents. Validating values is the API's job; the store
// enforces keys, references and scoping.
package store

import (
	"context"
	"crypto/cipher"
	"errors"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/errs"
)

// Store is the database of the control plane.
type Store struct {
	pool *pgxpool.Pool

	// kek wraps every data key (UseKeyEncryptionKey); aeads caches the
	// unwrapped secrets keys by id (a key never changes once written).
	keysMu sync.Mutex
	kek    cipher.AEAD
	kekID  string
	aeads  map[string]cipher.AEAD
}

// Open connects to the database at url (a postgres:// URL or key=value DSN) and
// checks that it answers.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, which may hold a password.
		return nil, errs.Invalid("databaseUrl", "not a valid PostgreSQL connection URL").WithOp("store.Open")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "connect to PostgreSQL").WithOp("store.Open")
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, errs.Wrap(errs.Unavailable, err, "connect to PostgreSQL at %s/%s; is it running?",
			cfg.ConnConfig.Host, cfg.ConnConfig.Database).WithOp("store.Open")
	}
	return &Store{pool: pool}, nil
}

// Close closes every connection; Close waits for connections in use.
func (s *Store) Close() { s.pool.Close() }

// Pool is the connection pool, for other packages' queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// dbError turns a failure of the database into our error: a unique key taken is
// ALREADY_EXISTS, a value it cannot store is INVALID_INPUT (final), another
// query PostgreSQL refused is a bug (INTERNAL); anything else means the database is unreachable or
// the call was cancelled (UNAVAILABLE). Our own errors pass through.
func dbError(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return e.WithOp(op)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return errs.New(errs.AlreadyExists, "the object exists already (%s)", pgErr.ConstraintName).WithOp(op)
	}
	if errors.As(err, &pgErr) && badData(pgErr.Code) {
		// Bad data is final: retrying the same value fails the same way.
		return errs.New(errs.InvalidInput, "the database refused a value (SQLSTATE %s: %s)", pgErr.Code, pgErr.Message).WithOp(op)
	}
	if errors.As(err, &pgErr) {
		return errs.Wrap(errs.Internal, err, "the database refused the query").WithOp(op)
	}
	return errs.Wrap(errs.Unavailable, err, "the database did not answer; retry later").WithOp(op)
}

// badData reports whether a SQLSTATE says the value, not the query or the
// database, is at fault: class 22 (data exception: invalid byte sequence,
// NUL in text, a string too long, a number out of range) and 54000 (a value
// over a PostgreSQL limit, such as an index row too large).
func badData(code string) bool {
	return strings.HasPrefix(code, "22") || code == "54000"
}

// violated returns the constraint a failed statement violated, and whether it was
// a unique ("23505") or foreign-key ("23503") violation.
func violated(err error) (constraint string, unique, foreignKey bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return "", false, false
	}
	return pgErr.ConstraintName, pgErr.Code == "23505", pgErr.Code == "23503"
}

// notFound is the error for an object that does not exist in the tenant: it never
// says whether the id exists elsewhere.
func notFound(what, id string) *errs.Error {
	if len(id) > 64 { // never echo a long input back
		id = strings.ToValidUTF8(id[:64], "") + "…"
	}
	return errs.New(errs.NotFound, "%s %q not found", what, id)
}

// collect scans every row with scan.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
}
