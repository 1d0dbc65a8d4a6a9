package store_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/store"
)

// TestConfirmMAC: a MAC is bound only to a node that waits for a
// confirmation, only if it was seen on the node's site and no other node
// has it; every refusal leaves the node, its wait and the discovery as
// they were. ListDiscoveries names the waiting node, then the owner.
func TestConfirmMAC(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	n := macLessNode(t, s, site, uuidA)
	taken := macLessNode(t, s, site, "8f2c6a2e-1111-4000-8000-00000000000b")
	report(t, s, site.ID, store.Discovery{MAC: macA, ClientUUID: uuidA, FirstSeen: t0, LastSeen: t0, Count: 1},
		store.Discovery{MAC: macB, FirstSeen: t0, LastSeen: t0, Count: 1})
	if _, err := s.BeginMACWait(ctx, "a", taken.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmMAC(ctx, "a", taken.ID, macB, store.WaitPXEDiscovery); err != nil {
		t.Fatalf("ConfirmMAC(%s, taken at once) = %v", macB, err)
	}
	confirm := func(tenant, mac string) error {
		_, err := s.ConfirmMAC(ctx, tenant, n.ID, mac, store.WaitMACConfirmation)
		return err
	}
	refused := func(what string, call func() error, kind errs.Kind, mention string) {
		t.Helper()
		before, _ := s.MACWaits(ctx, "a", n.ID)
		if err := call(); !errs.Is(err, kind) || !strings.Contains(err.Error(), mention) {
			t.Errorf("ConfirmMAC(%s) = %v, want %s mentioning %q", what, err, kind, mention)
		}
		if after, _ := s.MACWaits(ctx, "a", n.ID); !cmp.Equal(before, after) {
			t.Errorf("MAC wait after ConfirmMAC(%s) = %+v, want it unchanged: %+v", what, after, before)
		}
		unchanged(t, s, n.ID)
	}
	refused("a node that is not waiting", func() error { return confirm("a", macA) }, errs.InvalidState, "not waiting")
	if _, err := s.BeginMACWait(ctx, "a", n.ID); err != nil {
		t.Fatal(err)
	}
	refused("a node with no candidate yet", func() error { return confirm("a", macA) }, errs.InvalidState, "no candidate yet")
	if err := s.AwaitConfirmation(ctx, "a", n.ID, macA); err != nil {
		t.Fatal(err)
	}
	if got := listDiscoveries(t, s, site.ID); len(got) != 2 || got[0].CandidateFor+got[1].CandidateFor != n.ID {
		t.Errorf("ListDiscoveries while %s waits = %+v, want %s named as candidate of one", n.ID, got, macA)
	}
	refused("a MAC never seen", func() error { return confirm("a", "52:54:00:00:00:ff") }, errs.InvalidInput, "never seen")
	refused("another node's MAC", func() error { return confirm("a", macB) }, errs.AlreadyExists, taken.ID)
	refused("a node of another tenant", func() error { return confirm("b", macA) }, errs.NotFound, n.ID)
	got, err := s.ConfirmMAC(ctx, "a", n.ID, macA, store.WaitMACConfirmation)
	if err != nil || !cmp.Equal(got.MACs, []string{macA}) {
		t.Fatalf("ConfirmMAC(%s) = %v, %v; want the node with MACs [%s]", macA, got.MACs, err, macA)
	}
	if w, _ := s.MACWaits(ctx, "a", n.ID); len(w) != 0 {
		t.Errorf("MACWaits after the confirmation = %+v, want none", w)
	}
	if _, err := s.ConfirmMAC(ctx, "a", n.ID, macA, store.WaitMACConfirmation); !errs.Is(err, errs.InvalidState) {
		t.Errorf("ConfirmMAC twice = %v, want INVALID_STATE", err)
	}
	owners := map[string]string{}
	for _, d := range listDiscoveries(t, s, site.ID) {
		owners[d.MAC] = d.NodeID + "/" + d.CandidateFor
	}
	if diff := cmp.Diff(map[string]string{macA: n.ID + "/", macB: taken.ID + "/"}, owners); diff != "" {
		t.Errorf("ListDiscoveries owner/candidateFor after the confirmations (-want +got):\n%s", diff)
	}
}

// unchanged checks that node id has no MAC and that the discoveries name
// no owner for it.
func unchanged(t *testing.T, s *store.Store, id string) {
	t.Helper()
	n, err := s.GetNode(t.Context(), "a", id)
	if err != nil || len(n.MACs) != 0 {
		t.Errorf("node %s after a refused confirmation = MACs %v, %v; want none", id, n.MACs, err)
	}
	for _, d := range listDiscoveries(t, s, n.SiteID) {
		if d.NodeID == id {
			t.Errorf("discovery %s names %s as its owner after a refused confirmation", d.MAC, id)
		}
	}
}
