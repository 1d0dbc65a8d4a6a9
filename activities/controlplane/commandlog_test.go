package controlplane_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// commandLog runs command.queue and command.flush for one node's run and
// reads its command log.
type commandLog struct {
	t    *testing.T
	f    *fixture
	node string
	at   time.Time
	env  testsuite.WorkflowTestSuite
}

func newCommandLog(t *testing.T) *commandLog {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	return &commandLog{t: t, f: f, node: f.newNode(t, "d1"), at: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)}
}

// rec is the run's command n of kind, ended with status ("": just sent).
func (l *commandLog) rec(n int, kind, status string) *kinds.CommandRecord {
	c := &kinds.CommandRecord{TenantID: l.f.tenant, NodeID: l.node, SiteID: l.f.site, Kind: kind, RunsOn: "site",
		WorkflowID: "metal/" + l.node, RunID: "r1", Step: fmt.Sprintf("%02d.%s", n, kind), Status: status,
		StartedAt: l.at.Add(time.Duration(n) * time.Second)}
	if status != "" {
		c.FinishedAt = c.StartedAt.Add(time.Second / 2)
	}
	return c
}

func (l *commandLog) queue(a *controlplane.Activities, q kinds.CommandQueue) {
	l.t.Helper()
	v, err := l.env.NewTestActivityEnvironment().ExecuteLocalActivity(a.QueueCommand, q)
	var run string
	if err == nil {
		err = v.Get(&run)
	}
	if err != nil || run == "" {
		l.t.Fatalf("command.queue = %q, %v; want the run it ran in", run, err)
	}
}

func (l *commandLog) flush(a *controlplane.Activities, f kinds.CommandFlush) error {
	_, err := l.env.NewTestActivityEnvironment().ExecuteLocalActivity(a.FlushCommands, f)
	return err
}

// log is each step's status and start, from the run's.
func (l *commandLog) log() map[string]string {
	l.t.Helper()
	cmds, err := l.f.s.ListCommands(l.t.Context(), l.f.tenant, l.node)
	if err != nil {
		l.t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range cmds {
		out[c.Step] = fmt.Sprintf("%s %s", c.Status, c.StartedAt.Sub(l.at))
	}
	return out
}

// eventually waits for the log to be want.
func (l *commandLog) eventually(what string, want map[string]string) {
	l.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := l.log()
		if cmp.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s: command log (-want +got):\n%s", what, cmp.Diff(want, got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCommandLogBehind: command.queue returns before its records are
// written and the worker's writer writes them a moment later, in order;
// command.flush writes a run's commands whole before it returns, those the
// writer never had included; a writer a full queue behind makes
// command.queue write its records itself.
func TestCommandLogBehind(t *testing.T) {
	l := newCommandLog(t)
	l.queue(l.f.act, kinds.CommandQueue{Start: l.rec(1, kinds.BootSetEntry, "")})
	l.eventually("after the first start", map[string]string{"01.boot.setEntry": "sent 1s"})
	l.queue(l.f.act, kinds.CommandQueue{Outcome: l.rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		Start: l.rec(2, kinds.PowerSetPower, "")})
	l.eventually("after the outcome and the next start", map[string]string{"01.boot.setEntry": "succeeded 1s",
		"02.power.setPower": "sent 2s"})

	// The run's flush, with a command the writer never had (its process
	// died with it queued).
	flush := kinds.CommandFlush{Commands: []kinds.CommandRecord{*l.rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		*l.rec(2, kinds.PowerSetPower, kinds.CommandFailed), *l.rec(3, kinds.InventoryRefresh, kinds.CommandSucceeded)},
		Outcome: l.rec(3, kinds.InventoryRefresh, kinds.CommandSucceeded)}
	if err := l.flush(l.f.act, flush); err != nil {
		t.Fatalf("command.flush = %v", err)
	}
	flushed := map[string]string{"01.boot.setEntry": "succeeded 1s", "02.power.setPower": "failed 2s",
		"03.inventory.refresh": "succeeded 3s"}
	if diff := cmp.Diff(flushed, l.log()); diff != "" {
		t.Errorf("command log as command.flush returns (-want +got):\n%s", diff)
	}

	stalled := &controlplane.Activities{Store: l.f.s}
	controlplane.StallWriter(stalled)
	l.queue(stalled, kinds.CommandQueue{Start: l.rec(4, kinds.DiskWipe, "")})
	flushed["04.disk.wipe"] = "sent 4s"
	if diff := cmp.Diff(flushed, l.log()); diff != "" {
		t.Errorf("command log as command.queue returns with its writer stalled (-want +got):\n%s", diff)
	}
}

// TestFlushAfterTheWriter: a flush whose commands this worker's writer
// committed as they stand writes nothing (it returns with the database
// gone); one that records a command otherwise than the writer did (another
// outcome) writes it.
func TestFlushAfterTheWriter(t *testing.T) {
	l := newCommandLog(t)
	l.queue(l.f.act, kinds.CommandQueue{Start: l.rec(1, kinds.BootSetEntry, "")})
	l.queue(l.f.act, kinds.CommandQueue{Outcome: l.rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		Start: l.rec(2, kinds.PowerSetPower, "")})
	l.queue(l.f.act, kinds.CommandQueue{Outcome: l.rec(2, kinds.PowerSetPower, kinds.CommandSucceeded)})
	l.eventually("after the writer", map[string]string{"01.boot.setEntry": "succeeded 1s", "02.power.setPower": "succeeded 2s"})
	l.f.s.Close()

	other := kinds.CommandFlush{Commands: []kinds.CommandRecord{*l.rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		*l.rec(2, kinds.PowerSetPower, kinds.CommandFailed)}}
	if err := l.flush(l.f.act, other); errs.FromTemporal(err) != errs.Unavailable {
		t.Errorf("command.flush of an outcome the writer did not commit, the database gone = %v, want UNAVAILABLE", err)
	}
	same := kinds.CommandFlush{Commands: []kinds.CommandRecord{*l.rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		*l.rec(2, kinds.PowerSetPower, kinds.CommandSucceeded)}}
	if err := l.flush(l.f.act, same); err != nil {
		t.Errorf("command.flush of what the writer committed, the database gone = %v, want nil", err)
	}
}

// TestCommandLogFolds: a command whose start and outcome reach the writer
// within its gathering is written once, start and outcome in one row write
// (two commands: two writes, not four), and a flush cuts the gathering
// short: with the writer set to gather for a minute, the writer has
// committed the flush's commands as they stand when the flush returns (a
// flush that waited out its 5 s for the writer writes them itself).
func TestCommandLogFolds(t *testing.T) {
	l := newCommandLog(t)
	a := &controlplane.Activities{Store: l.f.s}
	controlplane.LingerWriter(a, time.Minute)
	l.queue(a, kinds.CommandQueue{Start: l.rec(1, kinds.BootSetEntry, "")})
	l.queue(a, kinds.CommandQueue{Outcome: l.rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		Start: l.rec(2, kinds.PowerSetPower, "")})
	l.queue(a, kinds.CommandQueue{Outcome: l.rec(2, kinds.PowerSetPower, kinds.CommandFailed),
		Start: l.rec(3, kinds.DiskWipe, "")})
	if got := l.log(); len(got) != 0 {
		t.Errorf("command log while the writer gathers = %v, want nothing yet", got)
	}
	flush := kinds.CommandFlush{Commands: []kinds.CommandRecord{*l.rec(1, kinds.BootSetEntry, kinds.CommandSucceeded),
		*l.rec(2, kinds.PowerSetPower, kinds.CommandFailed)}}
	if err := l.flush(a, flush); err != nil {
		t.Fatalf("command.flush = %v", err)
	}
	want := map[string]string{"01.boot.setEntry": "succeeded 1s", "02.power.setPower": "failed 2s", "03.disk.wipe": "sent 3s"}
	if diff := cmp.Diff(want, l.log()); diff != "" {
		t.Errorf("command log as command.flush returns (-want +got):\n%s", diff)
	}
	if got := controlplane.WriterWrites(a); got != 3 {
		t.Errorf("the writer sent %d writes for two ended commands and a third's start, want 3 (one a command)", got)
	}
}
