// Package testpg gives tests a real PostgreSQL: Main starts one private cluster
// (store/pgcluster) per test binary, and New gives each test its own fresh,
// migrated database, dropped when the test ends.
//
//	func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }
//
// To use an existing server instead, set BETTER_COMPUTE_TEST_POSTGRES_URL to the URL
// of a database on it as a user that may create databases.
package testpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/store"
	"github.com/better-compute/better-compute/store/pgcluster"
)

// EnvURL names the variable through which Main hands the cluster to New; set it
// beforehand to use a server of your own.
const EnvURL = "BETTER_COMPUTE_TEST_POSTGRES_URL"

// Main runs the tests of m against a private cluster in a temporary directory,
// then stops the cluster and removes the directory. It returns the exit code.
func Main(m *testing.M) int {
	if os.Getenv(EnvURL) != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "testpg-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testpg:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := pgcluster.StartConfig(ctx, pgcluster.Config{Dir: dir, Logger: logger, Ephemeral: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testpg: start PostgreSQL:", err)
		return 1
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testpg: stop PostgreSQL:", err)
		}
	}()
	os.Setenv(EnvURL, c.URL("postgres"))
	defer os.Unsetenv(EnvURL)
	return m.Run()
}

// New returns a store on a fresh database with the schema migrated and a
// random key-encryption key (as serve's key file gives it). The store is
// closed and the database dropped when the test ends.
func New(t testing.TB) *store.Store {
	t.Helper()
	s := Open(t, NewDatabase(t))
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	if err := s.UseKeyEncryptionKey(t.Context(), NewKey()); err != nil {
		t.Fatalf("UseKeyEncryptionKey() = %v", err)
	}
	return s
}

// NewKey returns a random 32-byte key (a key file's content).
func NewKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// Open opens a store on url and closes it when the test ends.
func Open(t testing.TB, url string) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("store.Open() = %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewDatabase creates an empty database, without the schema, and returns its URL.
// It is dropped when the test ends, after the cleanups registered later (such as
// closing stores opened on it) have run.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvURL)
	if admin == "" {
		t.Fatalf("testpg: %s is not set: call os.Exit(testpg.Main(m)) from TestMain", EnvURL)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("testpg: %s is not a URL: %v", EnvURL, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "test_" + hex.EncodeToString(b[:])
	adminExec(t, admin, "CREATE DATABASE "+name)
	t.Cleanup(func() { adminExec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}

func adminExec(t testing.TB, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("testpg: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("testpg: %s: %v", sql, err)
	}
}
