// Package debian holds the Debian package's sources: nfpm.yaml, package.sh
// (which task package runs), the systemd units, the maintainer scripts and
// the example configuration. Its test builds the package with package.sh,
// checks what it holds, installs it with dpkg into a throwaway root and runs
// what it installed there.
package debian

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/internal/testenv"
)

// units are the systemd units the package ships, with the command line
// whose --help must know every flag the unit and its environment file pass.
var units = []struct {
	name, envFile string
	help          []string // under /usr/bin
}{
	{"better-compute.service", "serve.env", []string{"better-compute", "serve", "--help"}},
	{"bcd-site.service", "bcd-site.env", []string{"bcd", "site", "--help"}},
}

func TestPackage(t *testing.T) {
	requireTools(t)
	deb := build(t, t.TempDir())
	t.Run("contents", func(t *testing.T) { checkContents(t, deb) })
	root := install(t, deb)
	t.Run("version", func(t *testing.T) { checkVersions(t, deb, root) })
	t.Run("users", func(t *testing.T) { checkUsers(t, root) })
	t.Run("units", func(t *testing.T) { verifyUnits(t, root) })
	t.Run("flags", func(t *testing.T) { checkFlags(t, root) })
	t.Run("config", func(t *testing.T) {
		path := filepath.Join(root, "etc/better-compute/config.yaml")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := config.Parse(path, b); err != nil || len(c.HardwareProfiles) == 0 {
			t.Errorf("config.Parse(%s) = %d profiles, %v; want the example's profiles", path, len(c.HardwareProfiles), err)
		}
	})
	t.Run("pxe-capability", func(t *testing.T) { checkPXECapability(t, root) })
	t.Run("remove", func(t *testing.T) { checkRemove(t, root) })
}

// checkRemove removes the package (prerm, postrm), which keeps the
// operator's configuration, then purges it, which does not.
func checkRemove(t *testing.T, root string) {
	conf := filepath.Join(root, "etc/better-compute/config.yaml")
	run(t, "dpkg", "--root="+root, "--force-script-chrootless", "--remove", "better-compute")
	if _, err := os.Stat(filepath.Join(root, "usr/bin/better-compute")); err == nil {
		t.Errorf("dpkg --remove left /usr/bin/better-compute")
	}
	if _, err := os.Stat(conf); err != nil {
		t.Errorf("dpkg --remove took the conffile config.yaml: %v", err)
	}
	run(t, "dpkg", "--root="+root, "--force-script-chrootless", "--purge", "better-compute")
	if _, err := os.Stat(conf); err == nil {
		t.Errorf("dpkg --purge left the conffile config.yaml")
	}
}

// requireTools ends t unless this machine can build and install the package.
func requireTools(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, for dpkg --root and the users postinst makes", "run the tests as root")
	}
	for tool, pkg := range map[string]string{"go": "golang", "git": "git", "dpkg": "dpkg", "dpkg-deb": "dpkg",
		"systemd-analyze": "systemd", "systemd-sysusers": "systemd", "setpriv": "util-linux", "ip": "iproute2"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "apt-get install "+pkg+" (./run does)")
		}
	}
}

// build runs package.sh, as task package does, and returns the one .deb it made.
func build(t *testing.T, out string) string {
	t.Helper()
	run(t, "bash", "package.sh", out)
	debs, _ := filepath.Glob(filepath.Join(out, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("package.sh %s made %v; want one .deb", out, debs)
	}
	return debs[0]
}

// checkContents lists the package: each file at its path with its mode,
// owned by root, the /etc files conffiles, the dependencies declared.
func checkContents(t *testing.T, deb string) {
	want := map[string]string{
		"./usr/bin/better-compute":                          "-rwxr-xr-x",
		"./usr/bin/bcd":                                     "-rwxr-xr-x",
		"./usr/lib/systemd/system/better-compute.service":   "-rw-r--r--",
		"./usr/lib/systemd/system/bcd-site.service":         "-rw-r--r--",
		"./usr/lib/sysusers.d/better-compute.conf":          "-rw-r--r--",
		"./etc/better-compute/":                             "drwxr-xr-x",
		"./etc/better-compute/config.yaml":                  "-rw-r--r--",
		"./etc/better-compute/serve.env":                    "-rw-r--r--",
		"./etc/better-compute/bcd-site.env":                 "-rw-r--r--",
		"./usr/share/better-compute/grafana/dashboard.json": "-rw-r--r--",
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(line) // -rwxr-xr-x root/root 123 2026-12-02 17:00 ./usr/bin/bcd
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s; want root/root", f[5], f[1])
		}
		got[f[5]] = f[0]
	}
	for path, mode := range want {
		if got[path] != mode {
			t.Errorf("dpkg-deb -c: %s = %q; want %q", path, got[path], mode)
		}
	}
	conffiles := strings.Fields(run(t, "dpkg-deb", "--info", deb, "conffiles"))
	wantConf := []string{"/etc/better-compute/bcd-site.env", "/etc/better-compute/config.yaml", "/etc/better-compute/serve.env"}
	slices.Sort(conffiles)
	if !slices.Equal(conffiles, wantConf) {
		t.Errorf("conffiles = %v; want %v", conffiles, wantConf)
	}
	fields := run(t, "dpkg-deb", "--field", deb, "Package", "Depends", "Recommends")
	for _, w := range []string{"Package: better-compute", "Depends: systemd", "postgresql-15 | postgresql", "ipxe"} {
		if !strings.Contains(fields, w) {
			t.Errorf("dpkg-deb --field = %q; want it to hold %q", fields, w)
		}
	}
}

// install installs deb with dpkg into a new root. The root's package
// database holds this host's entries for the packages deb depends on, so
// dpkg checks its Depends against what is installed here (and the root
// does not need them unpacked). dpkg runs the maintainer scripts outside the
// root, with DPKG_ROOT set to it (--force-script-chrootless): the root has
// no shell to chroot into.
func install(t *testing.T, deb string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	admin := filepath.Join(root, "var/lib/dpkg")
	for _, d := range []string{"info", "updates"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	status, err := os.ReadFile("/var/lib/dpkg/status")
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.TrimSpace(run(t, "dpkg-deb", "--field", deb, "Depends"))
	if err := os.WriteFile(filepath.Join(admin, "status"), []byte(stanzas(string(status), deps)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "dpkg", "--root="+root, "--force-script-chrootless", "--install", deb)
	if got := run(t, "dpkg", "--root="+root, "--status", "better-compute"); !strings.Contains(got, "Status: install ok installed") {
		t.Fatalf("dpkg --status better-compute = %q; want install ok installed", got)
	}
	return root
}

// stanzas returns the entries of a dpkg status file for the packages a
// Depends field names ("a (>= 1), b | c:any").
func stanzas(status, depends string) string {
	names := map[string]bool{}
	for _, alt := range strings.FieldsFunc(depends, func(r rune) bool { return r == ',' || r == '|' }) {
		name, _, _ := strings.Cut(strings.Fields(alt)[0], ":")
		names[name] = true
	}
	var out strings.Builder
	for _, st := range strings.Split(status, "\n\n") {
		first, _, _ := strings.Cut(st, "\n")
		if names[strings.TrimPrefix(first, "Package: ")] {
			out.WriteString(strings.TrimSpace(st) + "\n\n")
		}
	}
	return out.String()
}

// run runs name with args (in this directory) and returns its stdout,
// failing t with its output when it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

var versionLine = regexp.MustCompile(`^(\S+) version (\S+) \(commit ([0-9a-f]+)(\+modified)?, go\S+\)\n$`)

// checkVersions runs the installed binaries' --version: the module version
// and commit of this checkout (not "(devel)" and "unknown", what a build
// without VCS stamping says), and the package's version is that version.
func checkVersions(t *testing.T, deb, root string) {
	head := strings.TrimSpace(run(t, "git", "rev-parse", "HEAD"))[:12]
	debVersion := strings.TrimSpace(run(t, "dpkg-deb", "--field", deb, "Version"))
	for _, bin := range []string{"better-compute", "bcd"} {
		got := run(t, filepath.Join(root, "usr/bin", bin), "--version")
		m := versionLine.FindStringSubmatch(got)
		if m == nil || m[1] != bin || m[3] != head {
			t.Errorf("%s --version = %q; want %q version v… (commit %s…, go…)", bin, got, bin, head)
			continue
		}
		if want := debianVersion(m[2]); debVersion != want {
			t.Errorf("package Version = %q; want %q, from %s --version %q", debVersion, want, bin, m[2])
		}
	}
}

// debianVersion is a Go module version as a Debian version: v1.2.3 is
// 1.2.3; in a pseudo-version the first '-' is '~' (so it sorts before its
// release) and the others '.'.
func debianVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	core, pre, ok := strings.Cut(v, "-")
	if !ok {
		return v
	}
	return core + "~" + strings.ReplaceAll(pre, "-", ".")
}

// checkUsers: postinst made the units' users, with no login.
func checkUsers(t *testing.T, root string) {
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatalf("postinst made no %s/etc/passwd: %v", root, err)
	}
	for user, home := range map[string]string{"better-compute": "/var/lib/better-compute", "bcd-site": "/var/lib/bcd-site"} {
		u := passwdEntry(string(passwd), user)
		if u == nil || u[5] != home || !strings.HasSuffix(u[6], "nologin") {
			t.Errorf("passwd entry of %s = %q; want home %s and a nologin shell", user, u, home)
		}
	}
}

func passwdEntry(passwd, user string) []string {
	for _, line := range strings.Split(passwd, "\n") {
		if f := strings.Split(line, ":"); len(f) == 7 && f[0] == user {
			return f
		}
	}
	return nil
}
