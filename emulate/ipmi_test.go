//go:build fakehw

package emulate

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/testenv"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
)

// An IPMI machine of the rack, driven through ipmi_sim by the IPMI driver:
// inspection finds the machine's product UUID; PXE and power on boot the
// site's ramdisk for its first MAC; a power cycle boots it again; the disk
// boots its OS; power off stops it. The Redfish machine beside it is untouched.
func TestRackIPMIMachine(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ipmi_sim"); err != nil {
		testenv.Missing(t, "ipmi_sim", "apt-get install openipmi (./run installs it)")
	}
	relay := agenttest.NewRelay(t)
	boot := newBootServer(t, relay, nil)
	r := startRack(t, Config{Machines: 2, IPMI: 1, Dir: t.TempDir(), BootURL: boot.srv.URL, DisksPerMachine: []int64{1 << 30},
		Username: "admin", Password: "pw"})
	ms := r.Machines()
	if ms[0].BMCDriver != bmc.DriverRedfish || ms[1].BMCDriver != bmc.DriverIPMI || !strings.HasPrefix(ms[1].BMCAddress, "ipmi://127.0.0.1:") {
		t.Fatalf("Machines() = %+v, want emu-01 redfish and emu-02 ipmi://127.0.0.1:PORT", ms)
	}
	m := ms[1]
	boot.add(m.MACs[0], ids.New(ids.Node))
	d := ipmiDriver(t, m)
	ctx := context.Background()
	if inv, err := d.Inspect(ctx); err != nil || inv.ProductUUID != m.ProductUUID || len(inv.MACs) != 0 {
		t.Fatalf("Inspect() = %+v, %v, want product UUID %s and no MAC", inv, err, m.ProductUUID)
	}
	steps := []struct {
		dev    bmc.BootDevice
		action bmc.PowerAction
		want   string // BootedInto
		boots  int    // ramdisk boots so far
	}{
		{bmc.BootPXE, bmc.PowerOn, BootedRamdisk, 1},
		{bmc.BootPXE, bmc.PowerCycle, BootedRamdisk, 2},
		{bmc.BootDisk, bmc.PowerReset, BootedOS, 2},
		{"", bmc.PowerOff, BootedOff, 2},
	}
	for _, st := range steps {
		if st.dev != "" {
			if err := d.SetBootDevice(ctx, st.dev, false); err != nil {
				t.Fatalf("SetBootDevice(%s) = %v", st.dev, err)
			}
		}
		if _, err := d.SetPower(ctx, st.action); err != nil {
			t.Fatalf("SetPower(%s) = %v", st.action, err)
		}
		got := waitState(t, r, m.Name, st.want, func(s MachineState) bool { return s.BootedInto == st.want && s.RamdiskBoots == st.boots })
		if got.Power != map[bool]string{true: "off", false: "on"}[st.want == BootedOff] {
			t.Errorf("after %s from %s: power %s, want it to match %s", st.action, st.dev, got.Power, st.want)
		}
	}
	st, _ := r.State(m.Name)
	want := []string{"boot pxe", "power 1", "boot pxe", "power 0", "power 1", "boot default", "reset 1", "power 0"}
	if diff := cmp.Diff(want, st.BMCCalls); diff != "" {
		t.Errorf("Rack.State(%s).BMCCalls, ipmi_sim's chassis control (-want +got):\n%s", m.Name, diff)
	}
	if st, _ := r.State(ms[0].Name); st.RamdiskBoots != 0 || len(st.BMCCalls) != 0 {
		t.Errorf("the Redfish machine = %+v, want untouched", st)
	}
}

func ipmiDriver(t *testing.T, m MachineInfo) *ipmi.Driver {
	t.Helper()
	addr, err := bmc.ParseAddress(m.BMCDriver, m.BMCAddress)
	if err != nil {
		t.Fatalf("ParseAddress(%q) = %v", m.BMCAddress, err)
	}
	d, err := ipmi.New(ipmi.Config{Address: addr, Credentials: bmc.Credentials{Username: m.BMCUsername, Password: "pw"},
		Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("ipmi.New() = %v", err)
	}
	return d
}

// Config.IPMI out of range is INVALID_INPUT naming it, nothing started.
func TestRackIPMICount(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, 3} {
		_, err := Start(context.Background(), Config{Machines: 2, IPMI: n, Dir: t.TempDir(), BootURL: "http://127.0.0.1:1"})
		if !errs.Is(err, errs.InvalidInput) || !strings.Contains(err.Error(), "ipmi") {
			t.Errorf("Start(Machines 2, IPMI %d) = %v, want INVALID_INPUT naming ipmi", n, err)
		}
	}
}
