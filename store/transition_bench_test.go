package store_test

import (
	"fmt"
	"testing"

	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// BenchmarkTransition: the moves of a node's deploy and undeploy, as its
// workflows' node.transition makes them (ready → deploying → deployed →
// releasing → ready, the last consuming the wipe its undeploy recorded).
func BenchmarkTransition(b *testing.B) {
	s := testpg.New(b)
	ctx := b.Context()
	if err := s.EnsureTenant(ctx, "a"); err != nil {
		b.Fatal(err)
	}
	site, _, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "shared", Region: "lab-1"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.CreatePool(ctx, store.Pool{TenantID: "a", SiteID: site.ID, Class: "metal-host", Agent: "bcd"})
	if err != nil {
		b.Fatal(err)
	}
	n, err := s.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "a", SiteID: site.ID, PoolID: p.ID,
		BMCAddress: "https://bmc.test/redfish/v1/Systems/1", BMCDriver: "redfish", BMCCredentialsRef: "env://BMC"})
	if err != nil {
		b.Fatal(err)
	}
	move := func(from, to nodestate.State, info store.TransitionInfo) {
		if err := s.Transition(ctx, "a", n.ID, from, to, info); err != nil {
			b.Fatalf("%s → %s: %v", from, to, err)
		}
	}
	move(nodestate.Enrolling, nodestate.Inspecting, store.TransitionInfo{})
	move(nodestate.Inspecting, nodestate.Manageable, store.TransitionInfo{})
	move(nodestate.Manageable, nodestate.Inspecting, store.TransitionInfo{})
	run := store.Run{WorkflowID: "metal/" + n.ID}
	wipe := func(i int) {
		run.RunID = fmt.Sprintf("run-%d", i)
		if err := s.RecordWipe(ctx, attested(n, run)); err != nil {
			b.Fatal(err)
		}
	}
	wipe(0)
	move(nodestate.Inspecting, nodestate.Ready, store.TransitionInfo{Run: run})
	i := 0
	for b.Loop() {
		i++
		move(nodestate.Ready, nodestate.Deploying, store.TransitionInfo{})
		move(nodestate.Deploying, nodestate.Deployed, store.TransitionInfo{})
		move(nodestate.Deployed, nodestate.Releasing, store.TransitionInfo{})
		b.StopTimer()
		wipe(i)
		b.StartTimer()
		move(nodestate.Releasing, nodestate.Ready, store.TransitionInfo{Run: run})
	}
}
