//go:build fakehw

package demo_test

import (
	"testing"

	"github.com/better-compute/better-compute/bench/bare"
)

// TestCommonFlows: a loop position's flow is the one most of its runs
// followed (the first seen on a tie), and each run that followed another is
// off plan; the benchmark failed instead when one machine of 1,000 on the
// cluster restarted a stalled ramdisk boot (its deploy ran 49 activities
// where the others ran 36).
func TestCommonFlows(t *testing.T) {
	flow := func(n int) bare.Flow { return bare.Flow{Plan: make(bare.Plan, n)} }
	ran := []ranFlow{
		{runRef{"w1", "r1", 0}, flow(49), "restarted"},
		{runRef{"w1", "r2", 1}, flow(20), "undeploy"},
		{runRef{"w2", "r3", 0}, flow(36), "deploy"},
		{runRef{"w2", "r4", 1}, flow(20), "undeploy"},
		{runRef{"w3", "r5", 0}, flow(36), "deploy"},
		{runRef{"w3", "r6", 1}, flow(21), "undeploy-retried"},
		{runRef{"w4", "r7", 2}, flow(1), "tie-a"},
		{runRef{"w4", "r8", 2}, flow(2), "tie-b"},
	}
	flows, off := commonFlows(ran)
	if len(flows) != 3 || len(flows[0].Plan) != 36 || len(flows[1].Plan) != 20 || len(flows[2].Plan) != 1 {
		t.Errorf("commonFlows() flows of %d positions %v, want 3: 36, 20 and 1 steps", len(flows), flows)
	}
	var offIDs []string
	for _, r := range off {
		offIDs = append(offIDs, r.run.runID)
	}
	if want := []string{"r1", "r6", "r8"}; len(offIDs) != len(want) || offIDs[0] != want[0] || offIDs[1] != want[1] || offIDs[2] != want[2] {
		t.Errorf("commonFlows() off plan %v, want %v", offIDs, want)
	}
}
