// Package pgcluster owns a private PostgreSQL cluster in a directory: it finds the
// system's PostgreSQL programs, initializes the cluster once, starts it with no TCP
// listener and a Unix socket of its own, recovers from a server that was killed, and
// stops it. `better-compute serve` runs its database this way by default, and tests
// run one per test binary (internal/testpg).
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/errs"
)

const (
	superuser    = "postgres"
	port         = "5432" // only names the socket file: there is no TCP listener
	socketFile   = ".s.PGSQL." + port
	logFile      = "postgres.log"
	settingsFile = "better-compute.conf"
	startTimeout = 60 * time.Second
	// maxSocketPath is the longest Unix socket path Linux takes (sun_path is 108
	// bytes with its terminating NUL).
	maxSocketPath = 107
	// privateSocketPrefix names the short socket directories under os.TempDir().
	privateSocketPrefix = "bcpg-"
)

// Cluster is a running private PostgreSQL cluster.
type Cluster struct {
	dir       string
	bins      binaries
	acct      account
	logger    *slog.Logger
	socketDir string
	ephemeral bool
	adopted   bool

	mu      sync.Mutex
	stopped bool
}

// Config says where and how to run a cluster.
type Config struct {
	Dir    string // the cluster's directory (its PGDATA)
	Logger *slog.Logger
	// Ephemeral trades durability for speed: fsync, full-page writes and
	// synchronous commit are off, so a killed server may lose its last commits
	// (those its WAL writer had not yet written, up to about 600 ms) and an
	// operating-system crash may corrupt the cluster. For tests, whose data is
	// thrown away and whose servers are not killed.
	Ephemeral bool

	// Where the programs are looked for; "" means PATH, then /usr/lib/postgresql.
	path, libRoot string
}

// Start starts the cluster in dir (its PGDATA), creating it first if dir is not a
// cluster yet. When a server from an earlier Start still runs in dir it is adopted;
// when one died (killed -9) its leftovers are cleared. The server's log is
// dir/postgres.log.
func Start(ctx context.Context, dir string, logger *slog.Logger) (*Cluster, error) {
	return StartConfig(ctx, Config{Dir: dir, Logger: logger})
}

// StartConfig is Start with more choices.
func StartConfig(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.path == "" && cfg.libRoot == "" {
		// The search follows PATH like exec.LookPath does.
		cfg.path, cfg.libRoot = os.Getenv("PATH"), debianLibRoot
	}
	return start(ctx, cfg)
}

func start(ctx context.Context, cfg Config) (*Cluster, error) {
	bins, err := findBinaries(cfg.path, cfg.libRoot)
	if err != nil {
		return nil, err
	}
	dir, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	acct, err := chooseAccount(ctx, dir)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{dir: dir, bins: bins, acct: acct, ephemeral: cfg.Ephemeral, logger: logger.With("component", "pgcluster")}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); os.IsNotExist(err) {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	pf, ok, err := readPidFile(dir)
	if err != nil {
		return nil, err
	}
	if ok && servesDir(pf.pid, dir, bins) {
		if pf, err = c.waitReady(ctx); err != nil {
			return nil, err
		}
		c.socketDir, c.adopted = pf.socketDir, true
		c.logger.Info("adopted running postgres", "dir", dir, "pid", pf.pid)
		return c, nil
	}
	if ok {
		if err := c.clearStale(ctx, pf); err != nil {
			return nil, err
		}
	}
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// prepareDir creates dir if needed and returns its absolute, symlink-free path,
// which is what /proc shows as a server's working directory.
func prepareDir(dir string) (string, error) {
	if dir == "" {
		return "", errs.Invalid("dir", "the cluster needs a directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", errs.Wrap(errs.Internal, err, "create the cluster directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "resolve the cluster directory")
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "resolve the cluster directory")
	}
	return real, nil
}

// initdb creates the cluster: superuser postgres, UTF8, trust for local (socket)
// connections and reject over TCP, which is off anyway. Trust is safe because only
// the server's own user (and root) may open the socket (see writeSettings).
func (c *Cluster) initdb(ctx context.Context) error {
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return errs.Wrap(errs.Internal, err, "restrict the cluster directory")
	}
	if err := c.acct.own(c.dir); err != nil {
		return err
	}
	cmd := c.acct.command(ctx, c.bins, c.bins.initdb, "--pgdata", c.dir, "--username", superuser,
		"--encoding", "UTF8", "--locale", "C", "--auth-local", "trust", "--auth-host", "reject", "--no-instructions")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "initdb in %s failed: %s", c.dir, lastLines(out, 10))
	}
	conf := filepath.Join(c.dir, "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "open postgresql.conf")
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "\n# Written by better-compute on each start.\ninclude_if_exists = '%s'\n", settingsFile); err != nil {
		return errs.Wrap(errs.Internal, err, "extend postgresql.conf")
	}
	c.logger.Info("initialized postgres cluster", "dir", c.dir)
	return f.Close()
}

// run starts the server with pg_ctl and waits until it accepts connections.
func (c *Cluster) run(ctx context.Context) error {
	if err := c.chooseSocketDir(); err != nil {
		return err
	}
	if err := c.writeSettings(); err != nil {
		return err
	}
	cmd := c.acct.command(ctx, c.bins, c.bins.pgCtl, "start", "--pgdata", c.dir, "--log", c.logPath(),
		"--wait", "--timeout", fmt.Sprint(int(startTimeout.Seconds())), "--silent")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		logTail, _ := os.ReadFile(c.logPath())
		c.removeSocketDir()
		return errs.Wrap(errs.Unavailable, err, "postgres did not start in %s: %s; its log ends: %s",
			c.dir, bytes.TrimSpace(out), lastLines(logTail, 10))
	}
	pf, _, _ := readPidFile(c.dir)
	c.logger.Info("started postgres", "dir", c.dir, "pid", pf.pid, "socketDir", c.socketDir)
	return nil
}

// chooseSocketDir puts the socket in the data directory when its path fits in a
// Unix socket address (107 bytes). Otherwise (deep directories, long t.TempDir()
// names) it uses a short private directory under os.TempDir(), owned by the server
// and removed by Stop.
func (c *Cluster) chooseSocketDir() error {
	if len(filepath.Join(c.dir, socketFile)) <= maxSocketPath {
		c.socketDir = c.dir
		return nil
	}
	d, err := os.MkdirTemp("", privateSocketPrefix)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "create a socket directory")
	}
	if len(filepath.Join(d, socketFile)) > maxSocketPath {
		_ = os.Remove(d)
		return errs.New(errs.Unavailable, "socket directory %s is too long for a Unix socket: set TMPDIR to a short path", d)
	}
	if err := c.acct.own(d); err != nil {
		_ = os.Remove(d)
		return err
	}
	c.socketDir = d
	return nil
}

func isPrivateSocketDir(d string) bool {
	return d != "" && filepath.Dir(d) == filepath.Clean(os.TempDir()) &&
		strings.HasPrefix(filepath.Base(d), privateSocketPrefix)
}

func (c *Cluster) removeSocketDir() {
	if isPrivateSocketDir(c.socketDir) {
		_ = os.RemoveAll(c.socketDir)
	}
}

// writeSettings writes the settings that may change from start to start: no TCP,
// the socket's directory, a socket only the server's user may open, and the
// ephemeral trade-offs.
func (c *Cluster) writeSettings() error {
	s := fmt.Sprintf("listen_addresses = ''\nport = %s\nunix_socket_directories = '%s'\nunix_socket_permissions = 0700\n",
		port, strings.ReplaceAll(c.socketDir, "'", "''"))
	if c.ephemeral {
		s += "fsync = off\nfull_page_writes = off\nsynchronous_commit = off\n"
	}
	path := filepath.Join(c.dir, settingsFile)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		return errs.Wrap(errs.Internal, err, "write %s", settingsFile)
	}
	return c.acct.own(path)
}

func (c *Cluster) logPath() string { return filepath.Join(c.dir, logFile) }

// Adopted reports whether the server was running before Start (another
// process's, such as serve's while an admin command runs beside it).
func (c *Cluster) Adopted() bool { return c.adopted }

// Dir returns the cluster's data directory.
func (c *Cluster) Dir() string { return c.dir }

// URL returns a pgx connection URL for database over the cluster's Unix socket.
func (c *Cluster) URL(database string) string {
	q := url.Values{"host": {c.socketDir}, "port": {port}, "user": {superuser}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", Path: "/" + database, RawQuery: q.Encode()}).String()
}

// CreateDatabase creates database name if it does not exist yet.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "connect to the cluster in %s", c.dir)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return errs.Wrap(errs.Unavailable, err, "look for database %q", name)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" {
		return nil // created meanwhile by someone else
	}
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "create database %q", name)
	}
	c.logger.Info("created database", "database", name)
	return nil
}

// Stop shuts the server down (fast: open sessions are cut, transactions rolled
// back) and waits until it is gone. Calling it again does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout+10*time.Second)
	defer cancel()
	pf, running, err := readPidFile(c.dir)
	if err != nil {
		return err
	}
	if running && servesDir(pf.pid, c.dir, c.bins) {
		cmd := c.acct.command(ctx, c.bins, c.bins.pgCtl, "stop", "--pgdata", c.dir, "--mode", "fast",
			"--wait", "--timeout", fmt.Sprint(int(startTimeout.Seconds())), "--silent")
		if out, err := cmd.CombinedOutput(); err != nil && servesDir(pf.pid, c.dir, c.bins) {
			return errs.Wrap(errs.Unavailable, err, "stop postgres in %s: %s", c.dir, bytes.TrimSpace(out))
		}
	}
	c.removeSocketDir()
	c.stopped = true
	c.logger.Info("stopped postgres", "dir", c.dir)
	return nil
}

// lastLines returns the last n lines of b, for error messages.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
