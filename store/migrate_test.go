package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/store"
)

// schemaVersions returns the versions schema_migrations lists.
func schemaVersions(t *testing.T, s *store.Store) []int {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatalf("query schema_migrations: %v", err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

// allVersions returns 1…n for the n migrations in ./migrations.
func allVersions(t *testing.T) []int {
	t.Helper()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations/*.sql = %v, %v", files, err)
	}
	var vs []int
	for i := range files {
		vs = append(vs, i+1)
	}
	return vs
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	s := testpg.Open(t, testpg.NewDatabase(t))
	for i := range 2 {
		if err := s.Migrate(t.Context()); err != nil {
			t.Fatalf("Migrate() #%d = %v", i+1, err)
		}
	}
	if diff := cmp.Diff(allVersions(t), schemaVersions(t, s)); diff != "" {
		t.Errorf("schema_migrations (-want +got):\n%s", diff)
	}
	if err := s.EnsureTenant(t.Context(), "a"); err != nil {
		t.Errorf("EnsureTenant() after Migrate = %v", err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := testpg.NewDatabase(t)
	stores := []*store.Store{testpg.Open(t, url), testpg.Open(t, url), testpg.Open(t, url)}
	_, errOut := concurrently(len(stores), func(i int) (struct{}, error) {
		return struct{}{}, stores[i].Migrate(context.Background())
	})
	for i, err := range errOut {
		if err != nil {
			t.Errorf("concurrent Migrate() #%d = %v", i+1, err)
		}
	}
	if diff := cmp.Diff(allVersions(t), schemaVersions(t, stores[0])); diff != "" {
		t.Errorf("schema_migrations (-want +got):\n%s", diff)
	}
}

func TestMigrateRefusesNewerDatabase(t *testing.T) {
	t.Parallel()
	s := testpg.New(t)
	if _, err := s.Pool().Exec(t.Context(), "INSERT INTO schema_migrations (version, name) VALUES (999, '0999_future.sql')"); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "Migrate() on a newer schema", s.Migrate(t.Context()), errs.InvalidState)
}
