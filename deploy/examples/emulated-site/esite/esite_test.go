package esite

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/internal/testenv"
)

// TestMain is also the site's process: Run starts this test binary again
// inside the site namespace, and Inner runs the site there.
func TestMain(m *testing.M) {
	Inner()
	os.Exit(m.Run())
}

// wantBMC is what the BMC of a machine taken through the whole loop must
// have been asked, in order, written out rather than derived from the
// workflows: enrollment boots the ramdisk (PXE once, power on) and powers
// off; the deploy boots the ramdisk again, then the profile's steps boot
// the disk once and power-cycle into the OS; the undeploy boots the
// ramdisk from the running OS (a power cycle) and powers off.
var wantBMC = []string{
	"boot:Pxe/Once", "power:On", "power:ForceOff", // enroll → ready
	"boot:Pxe/Once", "power:On", "boot:Hdd/Once", "power:PowerCycle", // deploy
	"boot:Pxe/Once", "power:PowerCycle", "power:ForceOff", // undeploy
}

// wantBoots are the QEMU processes of that loop: the device each booted
// from and how it ended (QMP quit is power off; system_reset a restart).
var wantBoots = []string{"pxe(host-qmp-quit)", "pxe(host-qmp-system-reset)", "disk(host-qmp-system-reset)", "pxe(host-qmp-quit)"}

// TestEmulatedSite takes QEMU machines through the whole loop by their
// BMCs, for real: enrolled, they PXE-boot (proxy DHCP and TFTP from our
// site agent beside a dnsmasq that leases) into iPXE and the ramdisk over
// HTTP, which sends the inventory and quick-wipes the disk file (ready);
// deployed, the OS image the test builds (mkimage.sh) is written to the
// disk and the machine boots it from the disk, its console saying so;
// undeployed, the disk is wiped again (ready). `./run test` runs the
// legacy BIOS machine; BC_ESITE=full (task emulated-site) both.
func TestEmulatedSite(t *testing.T) {
	cfg := Config{RamdiskDir: filepath.Join("..", "..", "..", "..", "build", "ramdisk"), Dir: t.TempDir(),
		ReadyTimeout: 6 * time.Minute}
	if os.Getenv("BC_ESITE") != "full" {
		cfg.Machines = DefaultMachines()[:1]
	}
	if need, fix := Check(withDefaults(cfg)); need != "" {
		testenv.Missing(t, need, fix)
	}
	cfg.Image = buildImage(t, withDefaults(cfg).RamdiskDir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := Run(ctx, cfg, &out)
	t.Logf("the site's output:\n%s", out.String())
	if err != nil {
		t.Errorf("Run() = %v", err)
	}
	if len(res.Machines) != len(withDefaults(cfg).Machines) {
		t.Fatalf("Run() measured %d machines, want %d", len(res.Machines), len(withDefaults(cfg).Machines))
	}
	for _, m := range res.Machines {
		t.Logf("%s (%s): enroll → ready %v (power-on → ramdisk joined %v), deploy → OS up %v, undeploy → ready %v", m.Name, m.Firmware,
			m.EnrollToReady.Round(100*time.Millisecond), m.PowerOnToJoin.Round(100*time.Millisecond),
			m.DeployToOSUp.Round(100*time.Millisecond), m.UndeployToReady.Round(100*time.Millisecond))
		if m.State != "ready" || !m.DiskZero || m.PowerOnToJoin <= 0 || m.DeployToOSUp <= 0 {
			t.Errorf("%s: state %q, disk file zero %v, power-on → join %v, deploy → OS up %v; want ready, true, > 0, > 0 (%s)",
				m.Name, m.State, m.DiskZero, m.PowerOnToJoin, m.DeployToOSUp, m.Error)
		}
		if diff := cmp.Diff(wantBMC, m.BMCCalls); diff != "" {
			t.Errorf("%s: BMC calls (-want +got):\n%s", m.Name, diff)
		}
		if diff := cmp.Diff(wantBoots, m.Boots); diff != "" {
			t.Errorf("%s: boots (-want +got):\n%s", m.Name, diff)
		}
	}
	if t.Failed() {
		logTails(t, cfg.Dir)
	}
}

// buildImage builds the OS image with mkimage.sh, from the ramdisk's
// kernel.
func buildImage(t *testing.T, ramdiskDir string) string {
	t.Helper()
	for tool, pkg := range ImageTools {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "apt-get install "+pkg+" (./run installs it)")
		}
	}
	img := filepath.Join(t.TempDir(), "os.raw.zst")
	out, err := exec.Command("bash", filepath.Join("..", "mkimage.sh"), img, filepath.Join(ramdiskDir, "vmlinuz")).CombinedOutput()
	if err != nil {
		t.Fatalf("mkimage.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	return img
}

// logTails prints the end of every log and console the run left.
func logTails(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	for _, f := range append(files, more...) {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		t.Logf("%s (last lines):\n%s", f, strings.Join(lines[max(0, len(lines)-60):], "\n"))
	}
}
