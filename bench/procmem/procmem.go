// Package procmem owns the fleet benchmark's memory readings from /proc (Linux
// only): the peak resident set of this process (VmHWM, which ResetPeak brings
// back down to the current resident set), and the resident set of another
// process tree, such as Postgres (the postmaster and its backends), which has
// no peak of its own and so is sampled; and a process tree's CPU time.
package procmem

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// PeakRSS is this process's peak resident set in bytes (VmHWM) since it
// started or since the last ResetPeak.
func PeakRSS() (int64, error) { return PeakRSSOf(os.Getpid()) }

// PeakRSSOf is process pid's peak resident set in bytes (VmHWM), e.g. a
// child's read before it is stopped.
func PeakRSSOf(pid int) (int64, error) {
	st, err := readStatus(pid)
	if err != nil {
		return 0, err
	}
	v, ok := st["VmHWM"]
	if !ok {
		return 0, errs.New(errs.Unsupported, "/proc/%d/status has no VmHWM: peak RSS needs Linux", pid)
	}
	return v, nil
}

// ResetPeak sets this process's VmHWM to its current resident set (Linux 4.0
// and later), so that PeakRSS measures from now on.
func ResetPeak() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return errs.Wrap(errs.Unsupported, err, "cannot reset the peak RSS through /proc/self/clear_refs")
	}
	return nil
}

// readStatus reads the kB fields of /proc/pid/status, in bytes.
func readStatus(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, errs.Wrap(errs.NotFound, err, "process %d: no /proc status", pid)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		f := strings.Fields(rest)
		if !ok || len(f) != 2 || f[1] != "kB" {
			continue
		}
		if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[name] = v << 10
		}
	}
	return out, nil
}

// Tree returns root and every live descendant of it, root first.
func Tree(root int) ([]int, error) {
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(root))); err != nil {
		return nil, errs.Wrap(errs.NotFound, err, "process %d is not running", root)
	}
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, errs.Wrap(errs.Unsupported, err, "cannot list /proc")
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree, nil
}

// parentOf reads the parent pid from /proc/pid/stat.
func parentOf(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// TreeRSS is the resident set of root and its descendants in bytes, with
// shared pages counted once: the private anonymous memory of every process,
// plus the largest file-backed and shared-memory resident set of any one of
// them (forked servers share their binary's pages and their shared buffers).
// Summing every process's VmRSS would count those once per process.
func TreeRSS(root int) (int64, error) {
	pids, err := Tree(root)
	if err != nil {
		return 0, err
	}
	var anon, file, shmem int64
	for _, pid := range pids {
		st, err := readStatus(pid)
		if err != nil {
			continue // exited since Tree listed it
		}
		anon += st["RssAnon"]
		file = max(file, st["RssFile"])
		shmem = max(shmem, st["RssShmem"])
	}
	return anon + file + shmem, nil
}

// PidFile reads a process id from the first line of path, the way
// postmaster.pid and most pid files hold it.
func PidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, errs.Wrap(errs.NotFound, err, "no pid file at %s", path)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid == 0 {
		return 0, errs.New(errs.InvalidInput, "pid file %s does not start with a pid: %q", path, line)
	}
	return max(pid, -pid), nil // a standalone Postgres backend writes its pid negated
}

// Sampler samples a process tree's TreeRSS until stopped and keeps the peak.
type Sampler struct {
	root int
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak int64
	err  error
}

// Sample samples the tree under root every interval (and once at once).
func Sample(root int, every time.Duration) *Sampler {
	s := &Sampler{root: root, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(every)
	return s
}

func (s *Sampler) run(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rss, err := TreeRSS(s.root)
		s.mu.Lock()
		s.peak, s.err = max(s.peak, rss), err
		s.mu.Unlock()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

// Peak is the largest TreeRSS sampled so far, and the last sample's error.
func (s *Sampler) Peak() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.err
}

// Stop stops sampling and returns Peak. Safe to call twice.
func (s *Sampler) Stop() (int64, error) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	return s.Peak()
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/pid/stat's times:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// TreeCPU is the CPU time (user and system) root and its descendants have
// used: every live process's own, and what each has reaped of its exited
// children (cutime, cstime), so a backend that exits between two readings
// still counts. The difference of two readings is the tree's CPU between
// them; a process that exits without its parent in the tree (daemonized)
// drops out.
func TreeCPU(root int) (time.Duration, error) {
	pids, err := Tree(root)
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, pid := range pids {
		f, ok := statFields(pid)
		if !ok || len(f) < 15 {
			continue // exited since Tree listed it: its parent's cutime has it
		}
		for _, s := range f[11:15] { // utime, stime, cutime, cstime
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, errs.New(errs.Internal, "/proc/%d/stat: CPU time %q is not a number", pid, s)
			}
			ticks += v
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// statFields are the fields of /proc/pid/stat after the command (state,
// ppid, …): the command, in parentheses, may itself hold spaces and
// parentheses.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}
