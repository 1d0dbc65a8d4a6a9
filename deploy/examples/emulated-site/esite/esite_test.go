package esite

import (
	"bytes"
	"context"
	"os"
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

// enrollBMC is what the BMC of a machine taken from enrollment to ready
// must have been asked, in order: boot from the network once and power
// on (into the ramdisk), then power off.
var enrollBMC = []string{"boot:Pxe/Once", "power:On", "power:ForceOff"}

// TestEmulatedSite enrolls QEMU machines by their BMCs and takes them to
// ready through a real network boot: firmware PXE (proxy DHCP and TFTP
// from our site agent beside a dnsmasq that leases), iPXE, the ramdisk
// over HTTP, inventory, and a quick wipe of the disk file. `./run test`
// runs the legacy BIOS machine; BC_ESITE=full (task emulated-site) both.
func TestEmulatedSite(t *testing.T) {
	cfg := Config{RamdiskDir: filepath.Join("..", "..", "..", "..", "build", "ramdisk"), Dir: t.TempDir(),
		ReadyTimeout: 6 * time.Minute}
	if os.Getenv("BC_ESITE") != "full" {
		cfg.Machines = DefaultMachines()[:1]
	}
	if need, fix := Check(withDefaults(cfg)); need != "" {
		testenv.Missing(t, need, fix)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
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
		t.Logf("%s (%s): enroll → ready %v, power-on → ramdisk joined %v", m.Name, m.Firmware,
			m.EnrollToReady.Round(100*time.Millisecond), m.PowerOnToJoin.Round(100*time.Millisecond))
		if m.State != "ready" || !m.DiskZero || m.PowerOnToJoin <= 0 {
			t.Errorf("%s: state %q, disk file zero %v, power-on → join %v; want ready, true, > 0 (%s)", m.Name, m.State, m.DiskZero, m.PowerOnToJoin, m.Error)
		}
		if diff := cmp.Diff(enrollBMC, m.BMCCalls); diff != "" {
			t.Errorf("%s: BMC calls (-want +got):\n%s", m.Name, diff)
		}
		if len(m.Boots) == 0 || !strings.HasPrefix(m.Boots[0], "pxe(") {
			t.Errorf("%s: boots = %v, want the first from pxe", m.Name, m.Boots)
		}
	}
	if t.Failed() {
		logTails(t, cfg.Dir)
	}
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
