package esite

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// The provisioning network, inside the namespaces only.
const (
	leaserIP   = "10.78.0.1" // dnsmasq: leases, and IPv6 router advertisements
	siteIP     = "10.78.0.2" // bcd site on br0: proxy DHCP, TFTP, HTTP boot, relay
	leaseRange = "10.78.0.100,10.78.0.199,255.255.255.0,10m"
	bridge     = "br0"
)

// innerEnv carries the inner run's Config into the re-executed process.
const innerEnv = "BC_ESITE_INNER"

// resultPrefix starts the inner run's last line: its Result as JSON.
const resultPrefix = "esite-result: "

// Tools are the programs the site runs, by the Debian package that has them.
var Tools = map[string]string{"ip": "iproute2", "dnsmasq": "dnsmasq-base", "qemu-system-x86_64": "qemu-system-x86"}

// IPMITools are what a machine with Spec.IPMI needs: its BMC, and the
// client that cross-checks it.
var IPMITools = map[string]string{"ipmi_sim": "openipmi", "ipmitool": "ipmitool"}

// ImageTools are what mkimage.sh runs to build the OS image, by package.
var ImageTools = map[string]string{"syslinux": "syslinux", "mcopy": "mtools", "mkfs.vfat": "dosfstools", "sfdisk": "fdisk",
	"cpio": "cpio", "zstd": "zstd", "go": "golang (any Go; ./run sets the toolchain)"}

// Check returns what this machine lacks to run the site (root, a tool, a
// firmware or iPXE file, the ramdisk) and how to get it; "" when nothing.
func Check(cfg Config) (need, fix string) {
	if os.Geteuid() != 0 {
		return "root, to create network namespaces and taps", "run as root (CI does)"
	}
	for tool, pkg := range Tools {
		if _, err := exec.LookPath(tool); err != nil {
			return tool, "apt-get install " + pkg + " (./run installs it)"
		}
	}
	files := map[string]string{"/usr/lib/ipxe/undionly.kpxe": "ipxe", "/usr/lib/ipxe/snponly.efi": "ipxe",
		"/usr/share/OVMF/OVMF_CODE.fd": "ovmf", "/usr/share/OVMF/OVMF_VARS.fd": "ovmf"}
	for f, pkg := range files {
		if _, err := os.Stat(f); err != nil {
			return f, "apt-get install " + pkg + " (./run installs it)"
		}
	}
	for tool, pkg := range IPMITools {
		if _, err := exec.LookPath(tool); err != nil && slices.ContainsFunc(cfg.Machines, func(s Spec) bool { return s.IPMI }) {
			return tool, "apt-get install " + pkg + " (./run installs it)"
		}
	}
	for _, f := range []string{"vmlinuz", "initrd.img"} {
		if _, err := os.Stat(filepath.Join(cfg.RamdiskDir, f)); err != nil {
			return filepath.Join(cfg.RamdiskDir, f), "./run ramdisk"
		}
	}
	if cfg.Image != "" {
		if _, err := os.Stat(cfg.Image); err != nil {
			return cfg.Image, "./run emulated-site-image (deploy/examples/emulated-site/mkimage.sh)"
		}
	}
	return "", ""
}

// lab is the namespaces of one run: "site" holds the bridge, the machines'
// taps and QEMU, bcd site, the control plane and the BMCs (their
// loopback); "leaser" holds dnsmasq, on the bridge by a veth pair.
type lab struct {
	prefix string
	dir    string
	procs  []*exec.Cmd
}

// newLab makes the namespaces and the bridge. cleanup removes them and
// kills everything in them, also after a failure.
func newLab(dir string) (*lab, error) {
	removeStale()
	l := &lab{prefix: fmt.Sprintf("bces%d", os.Getpid()), dir: dir}
	steps := [][]string{
		{"netns", "add", l.ns("site")}, {"netns", "add", l.ns("leaser")},
		{"-n", l.ns("site"), "link", "set", "lo", "up"}, {"-n", l.ns("leaser"), "link", "set", "lo", "up"},
		{"-n", l.ns("site"), "link", "add", bridge, "type", "bridge"},
		{"-n", l.ns("site"), "addr", "add", siteIP + "/24", "dev", bridge},
		{"-n", l.ns("site"), "link", "set", bridge, "up"},
		{"-n", l.ns("site"), "link", "add", "p-leaser", "type", "veth", "peer", "name", "eth0", "netns", l.ns("leaser")},
		{"-n", l.ns("site"), "link", "set", "p-leaser", "master", bridge, "up"},
		{"-n", l.ns("leaser"), "addr", "add", leaserIP + "/24", "dev", "eth0"},
		{"-n", l.ns("leaser"), "addr", "add", "fd78::1/64", "dev", "eth0", "nodad"},
		{"-n", l.ns("leaser"), "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			l.cleanup()
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return l, nil
}

func (l *lab) ns(role string) string { return l.prefix + "-" + role }

// startLeaser runs dnsmasq in the leaser namespace: DHCP leases only (no
// PXE options, no DNS), and router advertisements, without which iPXE
// waits for IPv6 autoconfiguration on every boot.
func (l *lab) startLeaser(out io.Writer) error {
	args := []string{"netns", "exec", l.ns("leaser"), "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0",
		"--interface=eth0", "--bind-interfaces", "--dhcp-range=" + leaseRange, "--dhcp-range=fd78::,ra-only",
		"--enable-ra", "--dhcp-leasefile=" + filepath.Join(l.dir, "dnsmasq.leases"), "--pid-file=", "--log-dhcp"}
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start dnsmasq: %w", err)
	}
	l.procs = append(l.procs, cmd)
	go func() { _ = cmd.Wait() }()
	return nil
}

// runInner runs this program again inside the site namespace with cfg,
// copies its output to out, and returns the Result of its last line.
func (l *lab) runInner(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return Result{}, err
	}
	b, _ := json.Marshal(cfg)
	out = &lockedWriter{w: out}                                   // the site's stderr and stdout are copied at once
	cmd := exec.Command("ip", "netns", "exec", l.ns("site"), exe) // ip execs it: the PID is ours to kill
	cmd.Env = append(os.Environ(), innerEnv+"="+string(b))
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start the site: %w", err)
	}
	l.procs = append(l.procs, cmd)
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Signal(syscall.SIGTERM) })
	defer stop()
	var res Result
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if j, ok := strings.CutPrefix(line, resultPrefix); ok {
			_ = json.Unmarshal([]byte(j), &res)
			continue
		}
		fmt.Fprintln(out, line)
	}
	err = cmd.Wait()
	if err != nil && res.Error == "" {
		return res, errs.New(errs.Unavailable, "the site process ended: %v (its output is above)", err)
	}
	if res.Error != "" {
		return res, errs.New(errs.InvalidState, "%s", res.Error)
	}
	return res, nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// cleanup kills the lab's processes by PID, then whatever is left in its
// namespaces (QEMU, postgres), and deletes them.
func (l *lab) cleanup() {
	for _, c := range l.procs {
		if c.Process != nil {
			_ = c.Process.Kill()
		}
	}
	deleteNamespaces(l.prefix)
}

func deleteNamespaces(prefix string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for line := range strings.Lines(string(out)) {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, prefix+"-") {
			continue
		}
		// Twice: a process killed first may have had children the first
		// listing missed.
		for range 2 {
			pids, _ := exec.Command("ip", "netns", "pids", name).Output()
			for _, f := range strings.Fields(string(pids)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = exec.Command("ip", "netns", "del", name).Run()
	}
}

// removeStale deletes the namespaces of runs whose process is gone.
func removeStale() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	re := regexp.MustCompile(`^bces(\d+)-`)
	for line := range strings.Lines(string(out)) {
		m := re.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		if _, err := os.Stat("/proc/" + m[1]); os.IsNotExist(err) {
			deleteNamespaces("bces" + m[1])
		}
	}
}
