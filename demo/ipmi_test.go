//go:build fakehw

package demo_test

import (
	"context"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
	"github.com/better-compute/better-compute/demo"
)

// What an IPMI machine's BMC, ipmi_sim, asked its chassis control to set
// over the same lifecycle as the Redfish machine's (lifecycle_test.go): the
// IPMI driver cycles a running machine as power down then power up, each
// confirmed, and a boot device is set with each boot.
var (
	enrollIPMI   = []string{"boot pxe", "power 1", "power 0"}
	deployIPMI   = []string{"boot pxe", "power 1", "boot default"}
	undeployIPMI = []string{"boot pxe", "power 0", "power 1", "power 0"}
)

// TestLifecycleIPMIAndRedfish: a rack of one Redfish and one IPMI machine,
// each in its hardware profile's pool, goes enroll → ready → deploy →
// deployed → undeploy → ready at once. Both nodes get the same commands;
// every power action of the IPMI node reached ipmi_sim (its chassis control
// log), the Redfish machine's BMC got its usual requests, and ipmitool over
// lanplus with cipher suite 3 reads the IPMI machine off, as the rack says.
func TestLifecycleIPMIAndRedfish(t *testing.T) {
	ipmisim.NeedTools(t)
	ctx := ctxFor(t, 4*time.Minute)
	const password = "ipmi-demo-pw"
	d := startWith(t, func(c *demo.Config) { c.Machines, c.IPMI, c.BMCPassword = 2, 1, password })
	nodes, failed := d.LoopAll(ctx)
	if len(failed) > 0 {
		t.Fatalf("LoopAll = %v", failed)
	}
	want := map[string]struct {
		driver, pool string
		calls        []string
	}{
		"emu-01": {bmc.DriverRedfish, d.PoolID, concat(enrollBMC, deployBMC, undeployBMC)},
		"emu-02": {bmc.DriverIPMI, d.IPMIPoolID, concat(enrollIPMI, deployIPMI, undeployIPMI)},
	}
	for _, m := range d.Rack.Machines() {
		w := want[m.Name]
		n := node(t, d, nodes[m.Name])
		if n.State != "ready" || n.BmcDriver != w.driver || n.PoolId != w.pool || !cmp.Equal(sorted(n.Macs), sorted(m.MACs)) {
			t.Errorf("%s's node = state %s driver %s pool %s macs %v, want ready, %s, %s, %v", m.Name, n.State,
				n.BmcDriver, n.PoolId, n.Macs, w.driver, w.pool, m.MACs)
		}
		if diff := cmp.Diff(concat(enrollKinds, deployKinds, undeployKinds), kindsOf(commands(t, d, n.Id))); diff != "" {
			t.Errorf("%s: commands list --node (-want +got):\n%s", m.Name, diff)
		}
		st, _ := d.Rack.State(m.Name)
		if diff := cmp.Diff(w.calls, st.BMCCalls); diff != "" {
			t.Errorf("what %s's %s BMC received, Rack.State.BMCCalls (-want +got):\n%s", m.Name, w.driver, diff)
		}
		if st.RamdiskBoots != 3 || st.Power != "off" {
			t.Errorf("%s after the loop = %d ramdisk boots, power %s; want 3, off", m.Name, st.RamdiskBoots, st.Power)
		}
		if m.BMCDriver == bmc.DriverIPMI {
			if got := ipmitoolPower(t, m.BMCAddress, m.BMCUsername, password); got != "Chassis Power is off" {
				t.Errorf("ipmitool -I lanplus -C 3 chassis power status on %s = %q, want off", m.Name, got)
			}
		}
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// ipmitoolPower asks the BMC at addr (ipmi://host:port) for the chassis
// power with ipmitool, cipher suite 3.
func ipmitoolPower(t *testing.T, addr, user, password string) string {
	t.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), "ipmitool", "-I", "lanplus", "-C", "3", "-H", u.Hostname(), "-p", u.Port(),
		"-U", user, "-E", "chassis", "power", "status")
	cmd.Env = append(cmd.Environ(), "IPMI_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ipmitool chassis power status: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}
