//go:build fakehw

package demo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
)

// TestBootStallFailsNamingWhere: a machine whose NIC is unplugged never
// fetches its iPXE script. The site agent sees its boot stop at "armed",
// the workflow boots it again a bounded number of times, and the node fails
// within seconds (not hours) with one line naming where the boot stopped and
// what to check. With the cable back, recover brings it to ready.
func TestBootStallFailsNamingWhere(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	d := startWith(t, func(c *demo.Config) { c.Machines, c.BootStall = 1, 2*time.Second })
	m := d.Rack.Machines()[0]
	if err := d.Rack.UnplugNIC(m.Name, true); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	// While it waits, metal get and commands list say where the boot is.
	var shown, listed string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && (shown == "" || listed == ""); time.Sleep(100 * time.Millisecond) {
		if n := node(t, d, id); strings.Contains(n.Progress, "inventory.refresh: ramdisk boot: armed") {
			shown = n.Progress
		}
		for _, c := range commands(t, d, id) {
			if c.Status == "sent" && strings.HasPrefix(c.Progress, "ramdisk boot: armed") {
				listed = c.Kind + " " + c.Progress
			}
		}
	}
	if shown == "" || listed == "" {
		t.Errorf("while the boot stalled: metal get progress %q, commands list progress %q; want both to say the boot is armed", shown, listed)
	}
	t.Logf("while stalling, metal get says %q and commands list %q", shown, listed)
	if err := d.Wait(ctx, m.Name, id, "failed", 2*time.Minute); err != nil && !strings.Contains(err.Error(), " is failed ") {
		t.Fatalf("waiting for the stalled enroll to fail: %v", err)
	}
	n := node(t, d, id)
	t.Logf("failed %s after the enroll: %s", time.Since(began).Round(100*time.Millisecond), n.LastError)
	for _, want := range []string{"BOOT_STALLED", "3 ramdisk boots stalled", `stopped at "armed"`, "boot order", m.MACs[0]} {
		if !strings.Contains(n.LastError, want) {
			t.Errorf("lastError = %q, want it to mention %q", n.LastError, want)
		}
	}
	if n.State != "failed" || n.FailedFrom != "inspecting" {
		t.Errorf("node = %s from %s, want failed from inspecting", n.State, n.FailedFrom)
	}
	var powers, stalled int
	for _, c := range commands(t, d, id) {
		switch {
		case c.Kind == "power.setPower":
			powers++
		case c.Kind == "inventory.refresh" && c.Status == "failed" && c.ErrorKind == "BOOT_STALLED":
			stalled++
		}
	}
	if powers != 3 || stalled != 3 {
		t.Errorf("the enroll sent %d power.setPower and had %d inventory.refresh stall, want 3 boots each stalled", powers, stalled)
	}
	if st, _ := d.Rack.State(m.Name); st.RamdiskBoots != 0 {
		t.Errorf("ramdisk boots of the unplugged machine = %d, want 0", st.RamdiskBoots)
	}

	if err := d.Rack.UnplugNIC(m.Name, false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.API.Metal.Recover(ctx, connect.NewRequest(&v1.NodeVerbRequest{NodeId: id})); err != nil {
		t.Fatalf("metal.recover = %v", err)
	}
	if err := d.Wait(context.Background(), m.Name, id, "ready", time.Minute); err != nil {
		t.Fatalf("after recover with the NIC back: %v", err)
	}
}
