package boot

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/kinds"
)

// TestCountMilestones: each milestone a followed boot newly reaches is
// counted once (armed included); a repeat, a MAC that is not the node's
// and a node whose boot is not followed count nothing.
func TestCountMilestones(t *testing.T) {
	tb, _ := clockTable(t)
	got := map[string]int{}
	tb.CountMilestones(func(name string) { got[name]++ })
	if err := tb.SetEntry(kinds.BootEntry{NodeID: "node_a", MACs: []string{"52:54:00:00:00:01"}, Ramdisk: true,
		DiscoveryToken: "bcdisc_x"}); err != nil {
		t.Fatal(err)
	}
	tb.MarkMAC("52:54:00:00:00:01", MilestoneDHCP, "OFFER")
	tb.MarkMAC("52:54:00:00:00:01", MilestoneDHCP, "OFFER") // a retried request
	tb.MarkMAC("52:54:00:00:00:99", MilestoneDHCP, "OFFER") // not node_a's
	tb.Mark("node_a", MilestoneKernel, "HTTP 200")
	tb.Mark("node_a", MilestoneJoined, "")
	tb.Mark("node_a", MilestoneJoined, "") // every long poll
	tb.Mark("node_b", MilestoneJoined, "") // not followed
	want := map[string]int{MilestoneArmed: 1, MilestoneDHCP: 1, MilestoneKernel: 1, MilestoneJoined: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("milestones counted (-want +got):\n%s", diff)
	}
}
