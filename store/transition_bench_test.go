package store_test

import (
	"fmt"
	"testing"

	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// BenchmarkTransition: the moves of a node's deploy and undeploy, as its
// workflows' node.transition makes them (ready → deploying → deployed →
// releasing → ready, the last consuming the wipe its undeploy recorded).
func BenchmarkTransition(b *testing.B) {
	s, site := newSite(b)
	n := newNodeIn(b, s, site, "bcd", store.PoolPolicy{})
	run := store.Run{WorkflowID: "metal/" + n.ID}
	wipe := func(i int) {
		run.RunID = fmt.Sprintf("run-%d", i)
		if err := s.RecordWipe(b.Context(), attested(n, run)); err != nil {
			b.Fatal(err)
		}
	}
	wipe(0)
	move(b, s, n.ID, nodestate.Inspecting, nodestate.Ready, store.TransitionInfo{Run: run})
	i := 0
	for b.Loop() {
		i++
		move(b, s, n.ID, nodestate.Ready, nodestate.Deploying, store.TransitionInfo{})
		move(b, s, n.ID, nodestate.Deploying, nodestate.Deployed, store.TransitionInfo{})
		move(b, s, n.ID, nodestate.Deployed, nodestate.Releasing, store.TransitionInfo{})
		b.StopTimer()
		wipe(i)
		b.StartTimer()
		move(b, s, n.ID, nodestate.Releasing, nodestate.Ready, store.TransitionInfo{Run: run})
	}
}
