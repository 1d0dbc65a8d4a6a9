package testpg

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// databaseExists asks the admin database whether name exists.
func databaseExists(t *testing.T, name string) bool {
	t.Helper()
	s := Open(t, os.Getenv(EnvURL))
	var ok bool
	if err := s.Pool().QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestNewGivesFreshDatabasesDroppedAtCleanup(t *testing.T) {
	var names []string
	for i, sub := range []string{"first", "second"} {
		t.Run(sub, func(t *testing.T) {
			s := New(t)
			if err := s.EnsureTenant(t.Context(), "a"); err != nil {
				t.Fatalf("EnsureTenant() on New() #%d = %v", i+1, err)
			}
			var n int
			if err := s.Pool().QueryRow(t.Context(), "SELECT count(*) FROM tenants").Scan(&n); err != nil || n != 1 {
				t.Errorf("tenants in New() #%d = %d, %v; want 1 (a fresh database)", i+1, n, err)
			}
			names = append(names, s.Pool().Config().ConnConfig.Database)
		})
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("New() databases = %v, want two different ones", names)
	}
	for _, name := range names {
		if databaseExists(t, name) {
			t.Errorf("database %s exists after its test ended, want it dropped", name)
		}
	}
}
