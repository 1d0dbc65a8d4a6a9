package ipmibmc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/testenv"
)

func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "apt-get install openipmi ipmitool (./run installs them)")
		}
	}
}

// TestChassisControlBootsTheMachine: power on, reset and power cycle through
// a real IPMI client (ipmitool, lanplus, cipher suite 3) each call OnBoot
// once with the boot device set, and power off calls nothing; the BMC
// reports the product UUID as its system GUID.
func TestChassisControlBootsTheMachine(t *testing.T) {
	t.Parallel()
	needTools(t)
	booted := make(chan bmc.BootDevice, 10)
	const uuid = "4c4c4544-0042-3410-8057-b4c04f4d3332"
	b, err := Start(t.TempDir(), Config{Username: "admin", Password: "nineteen-bytes-long", ProductUUID: uuid,
		OnBoot: func(dev bmc.BootDevice) { booted <- dev }})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(b.Close)
	steps := []struct {
		args []string
		boot bmc.BootDevice // "" for no boot
	}{
		{[]string{"chassis", "bootdev", "pxe"}, ""},
		{[]string{"chassis", "power", "on"}, bmc.BootPXE},
		{[]string{"chassis", "bootdev", "disk"}, ""},
		{[]string{"chassis", "power", "reset"}, bmc.BootDisk},
		{[]string{"chassis", "power", "off"}, ""},
		{[]string{"chassis", "bootdev", "pxe"}, ""},
		{[]string{"chassis", "power", "on"}, bmc.BootPXE},
	}
	for _, st := range steps {
		if out, err := b.IPMItool(st.args...); err != nil {
			t.Fatalf("ipmitool %v = %v: %s", st.args, err, out)
		}
		select {
		case dev := <-booted:
			if dev != st.boot {
				t.Errorf("OnBoot after ipmitool %v = %q, want %q", st.args, dev, st.boot)
			}
		case <-time.After(3 * poll):
			if st.boot != "" {
				t.Errorf("OnBoot after ipmitool %v not called, want %q", st.args, st.boot)
			}
		}
	}
	if b.Power() != bmc.On {
		t.Errorf("Power() = %q, want on", b.Power())
	}
	want := []string{"boot pxe", "power 1", "boot default", "reset 1", "power 0", "boot pxe", "power 1"}
	if diff := cmp.Diff(want, b.Lines("log")); diff != "" {
		t.Errorf("chassis control log (-want +got):\n%s", diff)
	}
	if out, _ := b.IPMItool("mc", "guid"); !strings.Contains(out, uuid) {
		t.Errorf("ipmitool mc guid = %q, want %s", out, uuid)
	}
	b.Close()
	if out, err := b.IPMItool("-N", "1", "-R", "1", "chassis", "power", "status"); err == nil { // no need to wait long for no answer
		t.Errorf("ipmitool after Close() = %q, want no answer", out)
	}
}

// TestPowerOnBootsOnceThePowerLanded: with power changes landing late, as
// on a real machine, a power-on calls OnBoot only after Power() says on. A
// boot called while the power was still off had the rack's machine, which
// stops its ramdisk when it sees its power off, stop the ramdisk it had just
// booted and stay off (a demo's undeploy stalled twice for the 5 minutes of
// a ramdisk boot's bound).
func TestPowerOnBootsOnceThePowerLanded(t *testing.T) {
	t.Parallel()
	needTools(t)
	powerAtBoot := make(chan bmc.PowerState, 10)
	var started atomic.Pointer[BMC]
	b, err := Start(t.TempDir(), Config{Username: "admin", Password: "nineteen-bytes-long",
		ProductUUID: "4c4c4544-0042-3410-8057-b4c04f4d3332", PowerDelay: 3 * poll,
		OnBoot: func(bmc.BootDevice) { powerAtBoot <- started.Load().Power() }})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	started.Store(b)
	t.Cleanup(b.Close)
	for _, args := range [][]string{{"chassis", "bootdev", "pxe"}, {"chassis", "power", "on"}} {
		if out, err := b.IPMItool(args...); err != nil {
			t.Fatalf("ipmitool %v = %v: %s", args, err, out)
		}
	}
	select {
	case p := <-powerAtBoot:
		if p != bmc.On {
			t.Errorf("Power() when OnBoot was called = %q, want on: the machine booted before its power landed", p)
		}
	case <-time.After(10 * poll):
		t.Fatal("OnBoot not called after a power-on")
	}
}

func TestStartRefusesBadLogins(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Username: "admin", Password: "twenty-bytes-long-xx"},
		{Username: "seventeen-bytes-x", Password: "pw"},
		{Username: "admin", Password: `a"b`}, {Username: `a\b`, Password: "pw"},
		{Username: "admin", Password: "pw", ProductUUID: "not-a-uuid"},
	} {
		if _, err := Start(t.TempDir(), cfg); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("Start(%+v) = %v, want INVALID_INPUT", cfg, err)
		}
	}
}

func TestGUIDOf(t *testing.T) {
	if got, err := guidOf("4c4c4544-0042-3410-8057-b4c04f4d3332"); got != "44454c4c420010348057b4c04f4d3332" || err != nil {
		t.Errorf("guidOf() = %q, %v, want 44454c4c420010348057b4c04f4d3332", got, err)
	}
}

// TestChassisScriptReadsAreWhole: ipmi_sim reads the power and boot device
// through the chassis script while sets land; every read is a whole value.
// A script that rewrote its files in place let a read see the file empty
// between truncate and write, and ipmi_sim answered completion code 0xff
// to Get Chassis Status.
func TestChassisScriptReadsAreWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{"power": "0\n", "boot": "none\n", "chassis": chassisScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "chassis")
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 3; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				out, err := exec.Command(script, "0x20", "get", "power", "boot").CombinedOutput()
				lines := strings.Fields(string(out))
				if err != nil || len(lines) != 2 || (lines[0] != "power:0" && lines[0] != "power:1") || (lines[1] != "boot:pxe" && lines[1] != "boot:none") {
					t.Errorf("get power boot = %q, %v while sets land, want power:0 or 1 and boot:pxe or none", out, err)
					return
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		dev := []string{"pxe", "none"}[i%2]
		if out, err := exec.Command(script, "0x20", "set", "power", strconv.Itoa(i%2), "boot", dev).CombinedOutput(); err != nil {
			t.Errorf("set: %v: %s", err, out)
			break
		}
	}
	close(done)
	readers.Wait()
}
