package store_test

import (
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// TestUnfailRefail: a retry moves a failed node back to the state its run
// was in, compare-and-set, clearing failedFrom and the error; Refail puts
// it back as it was; neither moves a node that is not where it expects.
func TestUnfailRefail(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	n := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	move(t, s, n.ID, nodestate.Inspecting, nodestate.Failed, store.TransitionInfo{Error: "BOOT_STALLED: 3 boots", Maintenance: true})

	wantKind(t, "Unfail(to ready)", s.Unfail(ctx, "a", n.ID, nodestate.Ready), errs.InvalidState)
	wantKind(t, "Unfail(another tenant)", s.Unfail(ctx, "b", n.ID, nodestate.Enrolling), errs.InvalidState)
	if err := s.Unfail(ctx, "a", n.ID, nodestate.Enrolling); err != nil {
		t.Fatalf("Unfail(failed → enrolling) = %v", err)
	}
	got, err := s.GetNode(ctx, "a", n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != nodestate.Enrolling || got.FailedFrom != "" || got.LastError != "" || !got.Maintenance {
		t.Errorf("after Unfail: %s from %q, error %q, maintenance %v; want enrolling, no failedFrom or error, maintenance kept",
			got.State, got.FailedFrom, got.LastError, got.Maintenance)
	}
	wantKind(t, "Unfail(a node no longer failed)", s.Unfail(ctx, "a", n.ID, nodestate.Enrolling), errs.InvalidState)

	wantKind(t, "Refail(from a state it is not in)", s.Refail(ctx, "a", n.ID, nodestate.Deploying, nodestate.Inspecting, "x"),
		errs.InvalidState)
	if err := s.Refail(ctx, "a", n.ID, nodestate.Enrolling, nodestate.Inspecting, "BOOT_STALLED: 3 boots"); err != nil {
		t.Fatalf("Refail = %v", err)
	}
	got, _ = s.GetNode(ctx, "a", n.ID)
	if got.State != nodestate.Failed || got.FailedFrom != nodestate.Inspecting || got.LastError != "BOOT_STALLED: 3 boots" {
		t.Errorf("after Refail: %s from %q, error %q; want failed from inspecting as before", got.State, got.FailedFrom, got.LastError)
	}
}

// TestRecordRefusal: a verb that left its node where it was sets the
// node's error there, compare-and-set on the state, and clears it with "";
// neither touches an active node, nor a failed node's error.
func TestRecordRefusal(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	n, run := wipedNode(t, s, site) // inspecting
	lastError := func() string {
		t.Helper()
		got, err := s.GetNode(ctx, "a", n.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.LastError
	}
	const why = "deploy failed and left the node ready: x"
	if err := s.RecordRefusal(ctx, "a", n.ID, nodestate.Inspecting, why); err != nil || lastError() != "" {
		t.Errorf("RecordRefusal(an active node) = %v, error %q; want nil, nothing set", err, lastError())
	}
	move(t, s, n.ID, nodestate.Inspecting, nodestate.Ready, store.TransitionInfo{Run: run})
	if err := s.RecordRefusal(ctx, "a", n.ID, nodestate.Deployed, why); err != nil || lastError() != "" {
		t.Errorf("RecordRefusal(not in that state) = %v, error %q; want nil, nothing set", err, lastError())
	}
	if err := s.RecordRefusal(ctx, "a", n.ID, nodestate.Ready, why); err != nil || lastError() != why {
		t.Errorf("RecordRefusal = %v, error %q; want %q", err, lastError(), why)
	}
	if err := s.RecordRefusal(ctx, "b", n.ID, nodestate.Ready, ""); err != nil || lastError() != why {
		t.Errorf("RecordRefusal(another tenant) = %v, error %q; want it kept", err, lastError())
	}
	before, _ := s.GetNode(ctx, "a", n.ID)
	if err := s.RecordRefusal(ctx, "a", n.ID, nodestate.Ready, ""); err != nil || lastError() != "" {
		t.Errorf("RecordRefusal(\"\") = %v, error %q; want it cleared", err, lastError())
	}
	// Clearing is not a change of the node's: the API's settled reads
	// updated_at after a workflow's start as the workflow's own move.
	if after, _ := s.GetNode(ctx, "a", n.ID); !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("clearing the refusal moved updated_at from %s to %s, want it kept", before.UpdatedAt, after.UpdatedAt)
	}
	m := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	move(t, s, m.ID, nodestate.Inspecting, nodestate.Failed, store.TransitionInfo{Error: "BOOT_STALLED: 3 boots"})
	for _, msg := range []string{"", why} {
		if err := s.RecordRefusal(ctx, "a", m.ID, nodestate.Failed, msg); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetNode(ctx, "a", m.ID); got.LastError != "BOOT_STALLED: 3 boots" {
			t.Errorf("RecordRefusal(failed, %q): error %q; want the failure's kept", msg, got.LastError)
		}
	}
}
