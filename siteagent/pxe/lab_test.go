package pxe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/internal/testenv"
)

// The lab: network namespaces this test process creates, joined by a
// bridge in the "lan" namespace. Every address below exists only inside
// them.
const (
	srvIP    = "10.77.0.2"  // our proxy (or dnsmasq's, as the reference)
	leaserIP = "10.77.0.1"  // the DHCP server that leases addresses
	clientIP = "10.77.0.50" // the client namespace's own address, for TFTP and port 4011
)

// labPrefix names this process's namespaces; labCount tells labs apart.
var (
	labPrefix = "bcpx" + strconv.Itoa(os.Getpid())
	labCount  atomic.Int32
)

// tools are what the lab tests run, by the Debian package that has them.
var tools = map[string]string{
	"ip": "iproute2", "dnsmasq": "dnsmasq-base", "udhcpc": "udhcpc", "dhclient": "isc-dhcp-client",
	"tftp": "tftp-hpa", "atftp": "atftp", "busybox": "busybox-static", "perfdhcp": "kea-admin",
}

// needLab ends t unless this machine can run the lab: root and the tools.
func needLab(t testing.TB, extra ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to create network namespaces", "run the tests as root (CI does)")
	}
	names := []string{"ip", "dnsmasq", "udhcpc", "dhclient", "tftp", "atftp", "busybox"}
	for _, n := range append(names, extra...) {
		if _, err := exec.LookPath(n); err != nil {
			pkg := tools[n]
			if pkg == "" {
				pkg = "the package with " + n
			}
			testenv.Missing(t, n, "apt-get install "+pkg+" (./run installs the test tools)")
		}
	}
	for _, f := range []string{DefaultBIOSFile, DefaultEFIFile} {
		if _, err := os.Stat(f); err != nil {
			testenv.Missing(t, f, "apt-get install ipxe")
		}
	}
}

type lab struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	procs  []*exec.Cmd
}

// newLab makes the namespaces lan (a bridge), srv (srvIP), leaser
// (leaserIP) and client (clientIP), each on the bridge by a veth pair, and
// removes them, and every process started in them, when t ends.
func newLab(t testing.TB) *lab {
	t.Helper()
	removeStaleLabs()
	l := &lab{t: t, prefix: fmt.Sprintf("%sx%d", labPrefix, labCount.Add(1))}
	t.Cleanup(l.cleanup)
	for _, n := range []string{"lan", "srv", "leaser", "client"} {
		l.must("ip", "netns", "add", l.ns(n))
		l.must("ip", "-n", l.ns(n), "link", "set", "lo", "up")
	}
	lan := l.ns("lan")
	l.must("ip", "-n", lan, "link", "add", "br0", "type", "bridge")
	l.must("ip", "-n", lan, "link", "set", "br0", "up")
	for role, addr := range map[string]string{"srv": srvIP, "leaser": leaserIP, "client": clientIP} {
		port := "p-" + role
		l.must("ip", "-n", lan, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", l.ns(role))
		l.must("ip", "-n", lan, "link", "set", port, "master", "br0", "up")
		l.must("ip", "-n", l.ns(role), "addr", "add", addr+"/24", "dev", "eth0")
		l.must("ip", "-n", l.ns(role), "link", "set", "eth0", "up")
	}
	return l
}

func (l *lab) ns(role string) string { return l.prefix + "-" + role }

func (l *lab) must(name string, args ...string) {
	l.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// setMAC gives the client's interface mac, as each simulated machine.
func (l *lab) setMAC(mac string) {
	l.t.Helper()
	l.must("ip", "-n", l.ns("client"), "link", "set", "eth0", "address", mac)
}

// run runs a command in role's namespace to its end, within timeout.
func (l *lab) run(timeout time.Duration, role string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.ns(role)}, args...)...)
	cmd.WaitDelay = time.Second
	return cmd.CombinedOutput()
}

// proc is a process started in a namespace; stop ends it by its PID.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// start starts a command in role's namespace (`ip netns exec` execs it,
// so the PID is the command's); its stdout and stderr go to one buffer.
func (l *lab) start(role string, env []string, args ...string) *proc {
	l.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.ns(role)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("start %v: %v", args, err)
	}
	l.mu.Lock()
	l.procs = append(l.procs, cmd)
	l.mu.Unlock()
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

// stop sends SIGTERM, then SIGKILL after a while, and waits.
func (p *proc) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitFor waits until the process printed a line matching re.
func (p *proc) waitFor(re *regexp.Regexp, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := re.FindString(p.out.String()); m != "" {
			return m, nil
		}
		select {
		case <-p.done:
			if m := re.FindString(p.out.String()); m != "" {
				return m, nil
			}
			return "", fmt.Errorf("exited before %q:\n%s", re, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no %q within %s:\n%s", re, timeout, p.out.String())
}

// cleanup kills what the lab started, by PID, then anything left in its
// namespaces (started by those), and deletes the namespaces.
func (l *lab) cleanup() {
	l.mu.Lock()
	procs := l.procs
	l.mu.Unlock()
	for _, c := range procs {
		if c.Process != nil && c.ProcessState == nil {
			_ = c.Process.Kill()
		}
	}
	deleteNamespaces(l.prefix)
}

func deleteNamespaces(prefix string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for line := range strings.Lines(string(out)) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, prefix+"-") && !strings.HasPrefix(name, prefix+"x") {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", name).Output()
		for _, f := range strings.Fields(string(pids)) {
			// Our own PID is listed when a thread of ours entered the
			// namespace (inNetns) and stayed there.
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

// removeStaleLabs deletes the namespaces of lab runs whose process is gone
// (a test binary killed before its cleanup ran).
func removeStaleLabs() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	re := regexp.MustCompile(`^bcpx(\d+)x`)
	for line := range strings.Lines(string(out)) {
		m := re.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); os.IsNotExist(err) {
			deleteNamespaces("bcpx" + m[1])
		}
	}
}

// inNetns runs f on a thread inside the namespace, for making sockets
// there (a socket stays in the namespace it was made in).
func inNetns(name string, f func() error) error {
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		return err
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: a thread whose namespace changed dies with its goroutine
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

// syncBuffer is a bytes.Buffer safe for a process's writes and our reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// lines returns the buffer's lines that contain s.
func (b *syncBuffer) lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}
