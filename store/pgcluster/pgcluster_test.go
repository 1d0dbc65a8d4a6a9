package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

// startCluster starts a cluster in dir and stops it when the test ends.
func startCluster(t *testing.T, dir string) *Cluster {
	t.Helper()
	c, err := Start(t.Context(), dir, nil)
	if err != nil {
		t.Fatalf("Start(%s) = %v", dir, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop() = %v", err)
		}
	})
	return c
}

// query runs sql on database db of c and returns the first column of the one row.
func query(t *testing.T, c *Cluster, db, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.URL(db))
	if err != nil {
		t.Fatalf("connect to %s: %v", c.URL(db), err)
	}
	defer conn.Close(context.Background())
	var out string
	if err := conn.QueryRow(t.Context(), sql).Scan(&out); err != nil {
		t.Fatalf("%s = %v", sql, err)
	}
	return out
}

// execSQL runs sql on database db of c.
func execSQL(t *testing.T, c *Cluster, db, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.URL(db))
	if err != nil {
		t.Fatalf("connect to %s: %v", c.URL(db), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s = %v", sql, err)
	}
}

func TestStartStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	// Long enough that the socket path would not fit: it goes to a private directory.
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", maxSocketPath))
	c := startCluster(t, dir)
	if c.socketDir == c.Dir() || !isPrivateSocketDir(c.socketDir) {
		t.Errorf("socket directory for %s = %s, want a private one under %s", dir, c.socketDir, os.TempDir())
	}
	for range 2 {
		if err := c.CreateDatabase(t.Context(), "kept"); err != nil {
			t.Fatalf("CreateDatabase(kept) = %v", err)
		}
	}
	execSQL(t, c, "kept", "CREATE TABLE t AS SELECT 'still here'::text AS v")
	if got := query(t, c, "kept", "SHOW listen_addresses"); got != "" {
		t.Errorf("listen_addresses = %q, want \"\" (no TCP)", got)
	}
	if got := query(t, c, "kept", "SHOW server_encoding"); got != "UTF8" {
		t.Errorf("server_encoding = %q, want UTF8", got)
	}
	if got := query(t, c, "kept", "SHOW fsync"); got != "on" {
		t.Errorf("fsync = %q, want on", got)
	}
	oldSocket := c.socketDir
	for i := range 2 {
		if err := c.Stop(); err != nil {
			t.Fatalf("Stop() #%d = %v", i+1, err)
		}
	}
	if _, err := os.Stat(oldSocket); !os.IsNotExist(err) {
		t.Errorf("socket directory %s after Stop: %v, want it removed", oldSocket, err)
	}
	if _, err := os.Stat(filepath.Join(dir, logFile)); err != nil {
		t.Errorf("log file: %v", err)
	}
	c = startCluster(t, dir)
	if got := query(t, c, "kept", "SELECT v FROM t"); got != "still here" {
		t.Errorf("after restart SELECT v = %q, want %q", got, "still here")
	}
}

func TestStartAfterKill(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", maxSocketPath))
	c := startCluster(t, dir)
	execSQL(t, c, "postgres", "CREATE TABLE t AS SELECT 'committed'::text AS v")
	pf, ok, err := readPidFile(c.Dir())
	if !ok || err != nil {
		t.Fatalf("readPidFile() = %v, %v", ok, err)
	}
	if err := syscall.Kill(pf.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pf.pid, err)
	}
	for servesDir(pf.pid, c.Dir(), c.bins) {
		time.Sleep(10 * time.Millisecond)
	}
	c2 := startCluster(t, dir)
	if got := query(t, c2, "postgres", "SELECT v FROM t"); got != "committed" {
		t.Errorf("after kill -9 and Start, SELECT v = %q, want committed", got)
	}
	if _, err := os.Stat(pf.socketDir); !os.IsNotExist(err) {
		t.Errorf("dead server's socket directory %s: %v, want it removed", pf.socketDir, err)
	}
}

func TestStartWithReusedPid(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "pgc-") // short: the socket stays in the directory
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := startCluster(t, dir)
	if c.socketDir != c.Dir() {
		t.Errorf("socket directory for %s = %s, want the data directory", dir, c.socketDir)
	}
	// A second Start while the server runs adopts it.
	adopted := startCluster(t, dir)
	if got, want := adopted.URL("postgres"), c.URL("postgres"); got != want {
		t.Errorf("adopted URL = %s, want %s", got, want)
	}
	query(t, adopted, "postgres", "SELECT 'adopted'")
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	// A postmaster.pid and socket lock left behind whose pid now belongs to another
	// live process (pids are reused quickly in containers).
	pidFile := filepath.Join(c.Dir(), "postmaster.pid")
	stale := strconv.Itoa(os.Getpid()) + "\n" + c.Dir() + "\n0\n5432\n" + c.Dir() + "\n\n0 0\nready   \n"
	for _, f := range []string{pidFile, filepath.Join(c.Dir(), socketFile+".lock")} {
		if err := os.WriteFile(f, []byte(stale), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err = StartConfig(t.Context(), Config{Dir: dir, Ephemeral: true})
	if err != nil {
		t.Fatalf("StartConfig(%s, stale pid) = %v", dir, err)
	}
	t.Cleanup(func() { c.Stop() })
	if got := query(t, c, "postgres", "SHOW fsync"); got != "off" {
		t.Errorf("ephemeral cluster: fsync = %q, want off", got)
	}
}

func TestMissingBinaries(t *testing.T) {
	t.Parallel()
	_, err := start(t.Context(), Config{Dir: t.TempDir(), path: t.TempDir(), libRoot: filepath.Join(t.TempDir(), "none")})
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "apt-get install -y postgresql-15") {
		t.Errorf("start(no binaries) = %v, want UNAVAILABLE naming the postgresql-15 package", err)
	}
}
