package controlplane_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// macLess creates a node of the fixture's pool enrolled with only a UUID.
func (f *fixture) macLess(t *testing.T, uuid string) string {
	t.Helper()
	id := ids.New(ids.Node)
	if _, err := f.s.CreateNode(t.Context(), store.Node{ID: id, TenantID: f.tenant, SiteID: f.site, PoolID: f.pool,
		BMCAddress: "ipmi://bmc-" + id + ".test", BMCDriver: "ipmi", BMCCredentialsRef: "env://BMC", ProductUUID: uuid}); err != nil {
		t.Fatalf("CreateNode = %v", err)
	}
	return id
}

// TestFindCandidate: discovery.findCandidate keeps reading the store until
// a MAC is heard of under the node's UUID (in either byte order) since the
// wait began, and says Found false once the deadline passed; a candidate
// taken twice (a retried activity) gives the same MACs.
func TestFindCandidate(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{TrustProvisioningNetwork: true})
	const uuid, mac = "8f2c6a2e-0000-4000-8000-0000000000aa", "52:54:00:00:00:aa"
	node := f.macLess(t, uuid)
	in := kinds.MACWaitInput{TenantID: f.tenant, NodeID: node, SiteID: f.site, ProductUUID: uuid}
	var err error
	if in.Since, err = f.act.BeginMACWait(t.Context(), in); err != nil {
		t.Fatalf("BeginMACWait = %v", err)
	}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(f.act.FindCandidate)
	find := func(in kinds.MACWaitInput) kinds.Candidate {
		t.Helper()
		v, err := env.ExecuteActivity(f.act.FindCandidate, in)
		if err != nil {
			t.Fatalf("FindCandidate = %v", err)
		}
		var c kinds.Candidate
		if err := v.Get(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	passed := in
	passed.Deadline = f.now
	if c := find(passed); c.Found {
		t.Errorf("FindCandidate past its deadline with nothing seen = %+v, want not found", c)
	}
	in.Deadline = f.now.Add(time.Minute) // the fixture's clock stands still: only a sighting ends the poll
	go func() {
		time.Sleep(500 * time.Millisecond)
		// The firmware sends the UUID with its first three fields swapped.
		_ = f.s.ReportDiscoveries(t.Context(), f.site, []store.Discovery{{MAC: mac, ClientUUID: "2e6a2c8f-0000-0040-8000-0000000000aa",
			Arch: "EFI x86-64", FirstSeen: f.now, LastSeen: f.now, Count: 1}})
	}()
	c := find(in)
	if !c.Found || c.MAC != mac || c.Arch != "EFI x86-64" {
		t.Fatalf("FindCandidate after a sighting = %+v, want %s found", c, mac)
	}
	in.MAC = mac
	for i := range 2 {
		macs, err := f.act.TakeCandidate(t.Context(), in)
		if err != nil || !cmp.Equal(macs, []string{mac}) {
			t.Errorf("TakeCandidate #%d = %v, %v; want [%s]", i+1, macs, err, mac)
		}
	}
}
