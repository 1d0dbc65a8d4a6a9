package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// Lines of postmaster.pid (PostgreSQL's pidfile.h), counted from 0.
const (
	pidLinePID       = 0
	pidLineSocketDir = 4
	pidLineStatus    = 7
)

// pidFile is what postmaster.pid says about the server that wrote it.
type pidFile struct {
	pid       int
	socketDir string
	status    string // "starting", "ready", "stopping"; "" while it is being written
}

// readPidFile reads dir/postmaster.pid; ok is false when there is none.
func readPidFile(dir string) (pf pidFile, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if os.IsNotExist(err) {
		return pidFile{}, false, nil
	}
	if err != nil {
		return pidFile{}, false, errs.Wrap(errs.Internal, err, "read postmaster.pid")
	}
	lines := strings.Split(string(b), "\n")
	line := func(i int) string {
		if i < len(lines) {
			return strings.TrimSpace(lines[i])
		}
		return ""
	}
	pid, _ := strconv.Atoi(line(pidLinePID))
	if pid < 0 { // a standalone backend writes its pid negated
		pid = -pid
	}
	return pidFile{pid: pid, socketDir: line(pidLineSocketDir), status: line(pidLineStatus)}, true, nil
}

// servesDir reports whether pid is a live (not zombie) process of the postgres
// binary whose working directory is dir: the postmaster and all its children chdir
// into their data directory. A pid that was reused by another process, or that we may
// not inspect, is reported by its own facts: not ours unless /proc says so.
func servesDir(pid int, dir string, bins binaries) bool {
	if pid <= 0 {
		return false
	}
	proc := "/proc/" + strconv.Itoa(pid)
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil || cwd != dir {
		return false // gone, a zombie (no cwd), or elsewhere
	}
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		return false
	}
	// A binary replaced by a package upgrade shows as "… (deleted)".
	exe = strings.TrimSuffix(exe, " (deleted)")
	return exe == bins.postgres || filepath.Base(exe) == "postgres"
}

// leftovers returns the live postgres processes working in dir.
func leftovers(dir string, bins binaries) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if servesDir(pid, dir, bins) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// clearStale handles a postmaster.pid whose postmaster is dead (killed -9, machine
// crashed): it waits for the dead postmaster's children to notice and exit, because
// PostgreSQL refuses to start while they still hold its shared memory, then removes
// the file. PostgreSQL would remove a stale file itself, but not when its pid was
// reused by another process (or lingers as an unreaped zombie), which is common in
// containers.
func (c *Cluster) clearStale(ctx context.Context, pf pidFile) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := leftovers(c.dir, c.bins)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return errs.New(errs.Unavailable,
				"postgres processes %v of a dead server still run in %s; stop them and start again", pids, c.dir)
		}
		select {
		case <-ctx.Done():
			return errs.Wrap(errs.Unavailable, ctx.Err(), "wait for the processes of a dead server to exit")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := os.Remove(filepath.Join(c.dir, "postmaster.pid")); err != nil && !os.IsNotExist(err) {
		return errs.Wrap(errs.Internal, err, "remove stale postmaster.pid")
	}
	// The socket's lock file also names the dead pid, and stops a new server the same way.
	switch {
	case isPrivateSocketDir(pf.socketDir):
		_ = os.RemoveAll(pf.socketDir)
	case pf.socketDir == c.dir:
		_ = os.Remove(filepath.Join(c.dir, socketFile+".lock"))
		_ = os.Remove(filepath.Join(c.dir, socketFile))
	}
	c.logger.Info("removed stale postmaster.pid", "dir", c.dir, "deadPID", pf.pid)
	return nil
}

// waitReady waits for an adopted postmaster to say it is ready.
func (c *Cluster) waitReady(ctx context.Context) (pidFile, error) {
	deadline := time.Now().Add(startTimeout)
	for {
		pf, ok, err := readPidFile(c.dir)
		if err != nil {
			return pidFile{}, err
		}
		if ok && pf.status == "ready" {
			return pf, nil
		}
		if !ok || time.Now().After(deadline) || !servesDir(pf.pid, c.dir, c.bins) {
			return pidFile{}, errs.New(errs.Unavailable,
				"the running postgres in %s did not become ready; see %s", c.dir, c.logPath())
		}
		select {
		case <-ctx.Done():
			return pidFile{}, errs.Wrap(errs.Unavailable, ctx.Err(), "wait for postgres to be ready")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
