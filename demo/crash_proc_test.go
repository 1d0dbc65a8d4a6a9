//go:build fakehw

package demo_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/freeport"
)

// toolchain is the Go the crash tests build the real binaries with.
const toolchain = "go1.27.3"

// builds holds the binaries the crash tests run as real processes, built
// once per test binary into a directory TestMain removes.
var builds = struct {
	mu   sync.Mutex
	dir  string
	once map[string]*buildOnce
}{once: map[string]*buildOnce{}}

type buildOnce struct {
	once sync.Once
	path string
	err  error
	took time.Duration
}

func TestMain(m *testing.M) {
	code := m.Run()
	builds.mu.Lock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
	builds.mu.Unlock()
	os.Exit(code)
}

// binary builds ./cmd/<name> with -tags fakehw once and returns its path.
func binary(t testing.TB, name string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "bc-crash-bin-")
		if err != nil {
			builds.mu.Unlock()
			t.Fatal(err)
		}
		builds.dir = dir
	}
	b := builds.once[name]
	if b == nil {
		b = &buildOnce{}
		builds.once[name] = b
	}
	dir := builds.dir
	builds.mu.Unlock()
	b.once.Do(func() {
		start := time.Now()
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-tags", "fakehw", "-o", b.path, "github.com/better-compute/better-compute/cmd/"+name)
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+toolchain)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
		b.took = time.Since(start)
		t.Logf("built %s in %s", name, b.took.Round(100*time.Millisecond))
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// freePorts returns n loopback ports that were free a moment ago, below the
// ephemeral range (freeport): a process restarted on them keeps its URLs,
// and no connection, not even a client of its own reconnecting to one,
// takes one while it is down.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := freeport.Listen("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// proc is a real child process in its own process group, its output in a
// log file that every start of it appends to.
type proc struct {
	t    testing.TB
	name string
	bin  string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startProc starts bin with args; the test's cleanup stops it by its pid.
func startProc(t testing.TB, name, bin, logPath string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, bin: bin, log: logPath}
	p.start(args...)
	t.Cleanup(p.stop)
	return p
}

func (p *proc) start(args ...string) {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(f, "---- %s started %s: %s\n", p.name, time.Now().Format(time.TimeOnly), strings.Join(args, " "))
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}(p.done)
}

// pid is the running process's pid (its process group's id too).
func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill9 sends SIGKILL to the process and the rest of its process group (a
// child that made its own session, as PostgreSQL's postmaster does, lives
// on) and waits for it.
func (p *proc) kill9() {
	p.t.Helper()
	if err := syscall.Kill(-p.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.t.Fatalf("kill -9 %s (pgid %d): %v", p.name, p.pid(), err)
	}
	<-p.done
}

// stop ends the process with SIGTERM, then SIGKILL after 30 seconds.
func (p *proc) stop() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Logf("%s (pid %d) ignored SIGTERM for 30s; killing it", p.name, p.pid())
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitLog waits until the process's log has n lines containing s (counting
// every start), failing early when the process exits.
func (p *proc) waitLog(s string, n int, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for countLines(p.t, p.log, s) < n {
		if p.exited() {
			p.t.Fatalf("%s exited before logging %q:\n%s", p.name, s, tail(p.log, 40))
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not log %q within %s:\n%s", p.name, s, timeout, tail(p.log, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countLines counts the lines of the file at path that contain every one of subs.
func countLines(t testing.TB, path string, subs ...string) int {
	return len(grepLines(t, path, subs...))
}

func grepLines(t testing.TB, path string, subs ...string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		ok := len(line) > 0
		for _, s := range subs {
			ok = ok && bytes.Contains(line, []byte(s))
		}
		if ok {
			out = append(out, string(line))
		}
	}
	return out
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// alive reports whether a process with pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(after, "Z")
}

// waitGone waits for pid to go away.
func waitGone(pid int, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return !alive(pid)
}
