package controlplane_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// TestCommandLogBehind: command.queue returns before its records are
// written and the worker's writer writes them a moment later, in order;
// command.flush writes a run's commands whole before it returns, those the
// writer never had included; a writer a full queue behind makes
// command.queue write its records itself.
func TestCommandLogBehind(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t, "d1")
	var env testsuite.WorkflowTestSuite
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	rec := func(n int, kind, status string) *kinds.CommandRecord {
		c := &kinds.CommandRecord{TenantID: f.tenant, NodeID: node, SiteID: f.site, Kind: kind, RunsOn: "site",
			WorkflowID: "metal/" + node, RunID: "r1", Step: fmt.Sprintf("%02d.%s", n, kind), Status: status,
			StartedAt: at.Add(time.Duration(n) * time.Second)}
		if status != "" {
			c.FinishedAt = c.StartedAt.Add(time.Second / 2)
		}
		return c
	}
	queue := func(a *controlplane.Activities, q kinds.CommandQueue) {
		t.Helper()
		v, err := env.NewTestActivityEnvironment().ExecuteLocalActivity(a.QueueCommand, q)
		var run string
		if err == nil {
			err = v.Get(&run)
		}
		if err != nil || run == "" {
			t.Fatalf("command.queue = %q, %v; want the run it ran in", run, err)
		}
	}
	log := func() map[string]string {
		t.Helper()
		cmds, err := f.s.ListCommands(t.Context(), f.tenant, node)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, c := range cmds {
			out[c.Step] = fmt.Sprintf("%s %s", c.Status, c.StartedAt.Sub(at))
		}
		return out
	}
	eventually := func(what string, want map[string]string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := log()
			if cmp.Equal(want, got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: command log (-want +got):\n%s", what, cmp.Diff(want, got))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	queue(f.act, kinds.CommandQueue{Start: rec(1, kinds.BootSetEntry, "")})
	eventually("after the first start", map[string]string{"01.boot.setEntry": "sent 1s"})
	queue(f.act, kinds.CommandQueue{Outcome: rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		Start: rec(2, kinds.PowerSetPower, "")})
	eventually("after the outcome and the next start", map[string]string{"01.boot.setEntry": "succeeded 1s",
		"02.power.setPower": "sent 2s"})

	// The run's flush, with a command the writer never had (its process
	// died with it queued).
	flush := kinds.CommandFlush{Commands: []kinds.CommandRecord{*rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		*rec(2, kinds.PowerSetPower, kinds.CommandFailed), *rec(3, kinds.InventoryRefresh, kinds.CommandSucceeded)},
		Outcome: rec(3, kinds.InventoryRefresh, kinds.CommandSucceeded)}
	if _, err := env.NewTestActivityEnvironment().ExecuteLocalActivity(f.act.FlushCommands, flush); err != nil {
		t.Fatalf("command.flush = %v", err)
	}
	flushed := map[string]string{"01.boot.setEntry": "succeeded 1s", "02.power.setPower": "failed 2s",
		"03.inventory.refresh": "succeeded 3s"}
	if diff := cmp.Diff(flushed, log()); diff != "" {
		t.Errorf("command log as command.flush returns (-want +got):\n%s", diff)
	}

	stalled := &controlplane.Activities{Store: f.s}
	controlplane.StallWriter(stalled)
	queue(stalled, kinds.CommandQueue{Start: rec(4, kinds.DiskWipe, "")})
	flushed["04.disk.wipe"] = "sent 4s"
	if diff := cmp.Diff(flushed, log()); diff != "" {
		t.Errorf("command log as command.queue returns with its writer stalled (-want +got):\n%s", diff)
	}
}
