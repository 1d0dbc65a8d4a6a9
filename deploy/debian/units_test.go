package debian

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxExposure is the highest `systemd-analyze security` exposure level a
// unit may have, in tenths as its --threshold takes it (0 is the most
// locked down, 100 nothing at all): 2.0, so that a hardening option dropped
// from a unit fails the test (better-compute.service is at 1.7, bcd-site.service
// at 1.9, with systemd 252).
const maxExposure = 20

// verifyUnits runs systemd-analyze verify on each installed unit against
// the installed tree (so its ExecStart binary must be there; any warning, an
// unknown key say, fails too), then its security analysis against
// maxExposure. The units systemd itself ships (sysinit.target, …) are
// copied into the root first, as the package's Depends brings them on a host.
func verifyUnits(t *testing.T, root string) {
	run(t, "mkdir", "-p", filepath.Join(root, "lib/systemd"))
	run(t, "cp", "-a", "/lib/systemd/system", filepath.Join(root, "lib/systemd/"))
	for _, u := range units {
		path := filepath.Join(root, "usr/lib/systemd/system", u.name)
		out, err := exec.Command("systemd-analyze", "verify", "--root="+root, "--man=no", path).CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u.name, err, out)
		}
		out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--root="+root,
			"--threshold="+strconv.Itoa(maxExposure), "--no-pager", path).CombinedOutput()
		level := exposure.FindSubmatch(out)
		if level == nil {
			t.Errorf("systemd-analyze security %s: %v, no exposure level in\n%s", u.name, err, out)
			continue
		}
		if err != nil {
			t.Errorf("systemd-analyze security %s = exposure level %s (%v); want at most %.1f", u.name, level[1], err, float64(maxExposure)/10)
		}
		t.Logf("%s: exposure level %s", u.name, level[1])
	}
}

var exposure = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`)

var flagName = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

// checkFlags: every flag a unit's ExecStart and its environment file
// (examples in comments included) pass is one the installed binary's
// command knows, and every variable ExecStart expands is set in that file.
func checkFlags(t *testing.T, root string) {
	for _, u := range units {
		unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", u.name))
		if err != nil {
			t.Fatal(err)
		}
		env, err := os.ReadFile(filepath.Join(root, "etc/better-compute", u.envFile))
		if err != nil {
			t.Fatal(err)
		}
		exec := execStart(string(unit))
		help := run(t, filepath.Join(root, "usr/bin", u.help[0]), u.help[1:]...)
		for _, f := range flagName.FindAllString(exec+"\n"+string(env), -1) {
			if !regexp.MustCompile(`(^|[\s,])` + f + `([\s,=]|$)`).MatchString(help) {
				t.Errorf("%s or %s passes %s; %s does not know it", u.name, u.envFile, f, strings.Join(u.help, " "))
			}
		}
		for _, v := range regexp.MustCompile(`\$([A-Z_]+)`).FindAllStringSubmatch(exec, -1) {
			if !regexp.MustCompile(`(?m)^` + v[1] + `=`).Match(env) {
				t.Errorf("%s's ExecStart expands $%s; %s does not set it", u.name, v[1], u.envFile)
			}
		}
	}
}

func execStart(unit string) string {
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return v
		}
	}
	return ""
}

// checkPXECapability starts the installed bcd site as the package's
// bcd-site user with bcd-site.service's capabilities, network boot on in a
// network namespace of its own: proxy DHCP and TFTP bind (udp 67, 4011, 69)
// and it gets as far as the join, which fails for want of a token. Without
// the capability the same start fails on port 67: the unit's one capability
// is both enough and needed.
func checkPXECapability(t *testing.T, root string) {
	uid, gid := userIDs(t, root, "bcd-site")
	caps := unitCaps(t, root, "bcd-site.service")
	ns := fmt.Sprintf("bc-deb-%d", os.Getpid())
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	run(t, "ip", "-n", ns, "link", "add", "pxe0", "type", "veth", "peer", "name", "pxe1")
	run(t, "ip", "-n", ns, "addr", "add", "10.213.0.1/24", "dev", "pxe0")
	run(t, "ip", "-n", ns, "link", "set", "pxe0", "up")
	run(t, "ip", "-n", ns, "link", "set", "pxe1", "up")

	dir := t.TempDir()
	for _, name := range []string{"ipxe.kpxe", "ipxe.efi"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("iPXE"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	openToUser(t, root, dir)
	for i, tt := range []struct {
		caps, want string
	}{
		{caps, "holds no join yet"},
		{"-all", "needs root or CAP_NET_BIND_SERVICE"},
	} {
		data := filepath.Join(dir, "data"+strconv.Itoa(i))
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(data, uid, gid); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ip", "netns", "exec", ns, "setpriv",
			"--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--clear-groups", "--no-new-privs",
			"--inh-caps="+tt.caps, "--ambient-caps="+tt.caps, "--bounding-set="+tt.caps,
			filepath.Join(root, "usr/bin/bcd"), "site", "--control-plane", "https://127.0.0.1:9", "--ca-file", "/dev/null",
			"--data-dir", data, "--boot-listen", "127.0.0.1:0", "--relay-listen", "127.0.0.1:0",
			"--pxe-interface", "pxe0", "--ipxe-bios", filepath.Join(dir, "ipxe.kpxe"), "--ipxe-efi", filepath.Join(dir, "ipxe.efi"))
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("bcd site --pxe-interface as bcd-site with capabilities %s: %v\n%s\nwant it to fail with %q", tt.caps, err, out, tt.want)
		}
	}
}

// unitCaps returns a unit's AmbientCapabilities as setpriv's capability
// list: CAP_NET_BIND_SERVICE is "-all,+net_bind_service".
func unitCaps(t *testing.T, root, unit string) string {
	b, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", unit))
	if err != nil {
		t.Fatal(err)
	}
	list := "-all"
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "AmbientCapabilities="); ok {
			for _, c := range strings.Fields(v) {
				list += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
			}
		}
	}
	return list
}

// userIDs returns the uid and gid of user in root's passwd.
func userIDs(t *testing.T, root, user string) (int, int) {
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	u := passwdEntry(string(passwd), user)
	if u == nil {
		t.Fatalf("no %s in %s/etc/passwd", user, root)
	}
	uid, err1 := strconv.Atoi(u[2])
	gid, err2 := strconv.Atoi(u[3])
	if err1 != nil || err2 != nil {
		t.Fatalf("passwd entry %q", u)
	}
	return uid, gid
}

// openToUser lets any user reach root's binaries and dir: t.TempDir()'s
// directories are 0700.
func openToUser(t *testing.T, paths ...string) {
	for _, p := range paths {
		for d := p; strings.HasPrefix(d, filepath.Clean(os.TempDir())+"/"); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}
