package store_test

import (
	"testing"

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
