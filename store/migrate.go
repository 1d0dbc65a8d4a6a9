package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the pg_advisory_xact_lock key that serializes migrations
// ("bc-migra" in ASCII).
const migrationLock int64 = 0x62632d6d69677261

// migrationName is NNNN_words.sql.
var migrationName = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

// migration is one embedded schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// Migrate brings the schema up to date: the embedded migrations that
// schema_migrations does not list yet are applied in order, in one transaction
// holding an advisory lock, so concurrent calls (several serve processes starting
// at once) apply each migration exactly once. A database newer than this binary is
// INVALID_STATE.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := loadMigrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return dbError("store.Migrate", migrate(ctx, s, ms))
}

// loadMigrations reads dir of fsys; versions must run 1, 2, 3… without gaps.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "read migrations")
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, errs.New(errs.Internal, "migration %s is not named NNNN_words.sql", e.Name())
		}
		version, _ := strconv.Atoi(m[1])
		if version != len(ms)+1 {
			return nil, errs.New(errs.Internal, "migration %s: want version %04d next", e.Name(), len(ms)+1)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "read migration %s", e.Name())
		}
		ms = append(ms, migration{version: version, name: e.Name(), sql: string(b)})
	}
	return ms, nil
}

func migrate(ctx context.Context, s *Store, ms []migration) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return err
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return err
	}
	done := make(map[int]bool, len(applied))
	for _, v := range applied {
		if v > len(ms) {
			return errs.New(errs.InvalidState,
				"the database schema has migration %d, newer than this binary knows (%d): run a newer better-compute", v, len(ms))
		}
		done[v] = true
	}
	for _, m := range ms {
		if done[m.version] {
			continue
		}
		// Without arguments pgx uses the simple protocol, which runs every statement of the file.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
