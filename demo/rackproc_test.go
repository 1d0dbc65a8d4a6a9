//go:build fakehw

package demo_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/better-compute/better-compute/demo"
)

// TestRackProcess: with Config.RackCommand the rack runs in a process of its
// own (better-compute's demo-rack, as demo --rack-process runs it), the
// machines go through the loop, and the memory report gives the control
// plane and the rack apart, each its own process's peak.
func TestRackProcess(t *testing.T) {
	bin := binary(t, "better-compute")
	d := startWith(t, func(c *demo.Config) {
		c.Machines, c.RackCommand = 2, []string{bin, "demo-rack"}
	})
	if d.Rack != nil {
		t.Fatal("the rack runs in this process too")
	}
	if got := len(d.Machines()); got != 2 {
		t.Fatalf("the rack's process printed %d machines, want 2", got)
	}
	if _, failed := d.LoopAll(ctxFor(t, 3*time.Minute)); len(failed) > 0 {
		t.Fatalf("LoopAll = %v", failed)
	}
	report := d.MemoryReport()
	t.Log(report)
	m := regexp.MustCompile(`control plane (\d+) MiB = (\d+) MiB its process .* \+ (\d+) MiB PostgreSQL .*; emulated rack (\d+) MiB its process`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("report %q gives no control plane and rack apart", report)
	}
	for i, what := range []string{"control plane", "its process", "PostgreSQL", "rack"} {
		if v, _ := strconv.Atoi(m[i+1]); v <= 0 {
			t.Errorf("%s: %d MiB in %q", what, v, report)
		}
	}
}
