package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// TestRetiredKeepsWhatWasSkipped: a move into retired stores the note the
// workflow gives (what it skipped, e.g. the wipe of a node that never got
// a MAC) as the node's lastError; any other move but failed clears it.
func TestRetiredKeepsWhatWasSkipped(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	n := macLessNode(t, s, site, uuidA)
	note := "retired without a wipe: the node never got a MAC, so no ramdisk of ours booted on it"
	for _, m := range []struct {
		from, to nodestate.State
		err      string
	}{{nodestate.Enrolling, nodestate.Retiring, ""}, {nodestate.Retiring, nodestate.Retired, note}} {
		if err := s.Transition(t.Context(), "a", n.ID, m.from, m.to, store.TransitionInfo{Error: m.err}); err != nil {
			t.Fatalf("Transition(%s → %s) = %v", m.from, m.to, err)
		}
	}
	got, err := s.GetNode(t.Context(), "a", n.ID)
	if err != nil || got.State != nodestate.Retired || got.LastError != note {
		t.Errorf("retired node = %s %q, %v; want retired %q", got.State, got.LastError, err, note)
	}
}

// TestGetNodeAndPool: one round trip reads what GetNode and GetPool read;
// an unknown node, or another tenant's, is NOT_FOUND.
func TestGetNodeAndPool(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	n := macLessNode(t, s, site, uuidA)
	wantNode, err := s.GetNode(t.Context(), "a", n.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantPool, err := s.GetPool(t.Context(), "a", n.PoolID)
	if err != nil {
		t.Fatal(err)
	}
	gotNode, gotPool, err := s.GetNodeAndPool(t.Context(), "a", n.ID)
	if err != nil {
		t.Fatalf("GetNodeAndPool = %v", err)
	}
	if diff := cmp.Diff(wantNode, gotNode); diff != "" {
		t.Errorf("node (-GetNode +GetNodeAndPool):\n%s", diff)
	}
	if diff := cmp.Diff(wantPool, gotPool); diff != "" {
		t.Errorf("pool (-GetPool +GetNodeAndPool):\n%s", diff)
	}
	for _, ref := range [][2]string{{"a", "node_unknown"}, {"b", n.ID}} {
		if _, _, err := s.GetNodeAndPool(t.Context(), ref[0], ref[1]); !errs.Is(err, errs.NotFound) {
			t.Errorf("GetNodeAndPool(%s, %s) = %v, want NOT_FOUND", ref[0], ref[1], err)
		}
	}
}
