package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// newNodeIn returns a node of tenant "a" in state inspecting, in a new pool
// of agent and policy.
func newNodeIn(t testing.TB, s *store.Store, site store.Site, agent string, policy store.PoolPolicy) store.Node {
	t.Helper()
	ctx := t.Context()
	p, err := s.CreatePool(ctx, store.Pool{TenantID: "a", SiteID: site.ID, Class: "metal-host", Agent: agent, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	id := ids.New(ids.Node)
	n, err := s.CreateNode(ctx, store.Node{ID: id, TenantID: "a", SiteID: site.ID, PoolID: p.ID,
		BMCAddress: "https://bmc-" + id + ".test/redfish/v1/Systems/1", BMCDriver: "redfish", BMCCredentialsRef: "env://BMC"})
	if err != nil {
		t.Fatal(err)
	}
	move(t, s, n.ID, nodestate.Enrolling, nodestate.Inspecting, store.TransitionInfo{})
	return n
}

// wipedNode returns a node of newNodeIn and a run of its workflow with an
// attested wipe recorded, which a move into ready consumes.
func wipedNode(t *testing.T, s *store.Store, site store.Site) (store.Node, store.Run) {
	t.Helper()
	n := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	run := store.Run{WorkflowID: "metal/" + n.ID, RunID: "run-1"}
	if err := s.RecordWipe(t.Context(), attested(n, run)); err != nil {
		t.Fatal(err)
	}
	return n, run
}

func move(t testing.TB, s *store.Store, id string, from, to nodestate.State, info store.TransitionInfo) {
	t.Helper()
	if err := s.Transition(t.Context(), "a", id, from, to, info); err != nil {
		t.Fatalf("Transition(%s → %s) = %v", from, to, err)
	}
}

func stateOf(t *testing.T, s *store.Store, id string) nodestate.State {
	t.Helper()
	n, err := s.GetNode(t.Context(), "a", id)
	if err != nil {
		t.Fatal(err)
	}
	return n.State
}

func attested(n store.Node, run store.Run) store.WipeRecord {
	return store.WipeRecord{TenantID: n.TenantID, NodeID: n.ID, WorkflowID: run.WorkflowID, RunID: run.RunID,
		Mode: "quick", Disks: []string{"wwn-1"}, Signer: "ramdisk/" + n.ID + " serial 1"}
}

// TestReadyNeedsAttestedWipe: a node moves into ready only by consuming an
// attested wipe that its own workflow run recorded, once.
func TestReadyNeedsAttestedWipe(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	n := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	run := store.Run{WorkflowID: "metal/" + n.ID, RunID: "run-1"}
	ready := store.TransitionInfo{Run: run}

	err := s.Transition(ctx, "a", n.ID, nodestate.Inspecting, nodestate.Ready, ready)
	wantKind(t, "Transition(inspecting → ready) without a wipe", err, errs.UnverifiedWipe)

	other := n
	other.ID = newNodeIn(t, s, site, "bcd", store.PoolPolicy{}).ID
	if err := s.RecordWipe(ctx, attested(other, run)); err != nil { // another node's wipe, same run id
		t.Fatal(err)
	}
	if err := s.RecordWipe(ctx, attested(n, store.Run{WorkflowID: run.WorkflowID, RunID: "run-0"})); err != nil {
		t.Fatal(err)
	}
	err = s.Transition(ctx, "a", n.ID, nodestate.Inspecting, nodestate.Ready, ready)
	wantKind(t, "Transition(inspecting → ready) with only another node's and another run's wipe", err, errs.UnverifiedWipe)
	if got := stateOf(t, s, n.ID); got != nodestate.Inspecting {
		t.Fatalf("state after refused moves = %s, want inspecting", got)
	}

	if err := s.RecordWipe(ctx, attested(n, run)); err != nil {
		t.Fatalf("RecordWipe = %v", err)
	}
	if err := s.RecordWipe(ctx, attested(n, run)); err != nil {
		t.Errorf("RecordWipe(the same proof again, a retried activity) = %v, want nil", err)
	}
	second := attested(n, run)
	second.Mode = "secure-erase"
	wantKind(t, "RecordWipe(a second, different wipe in one run)", s.RecordWipe(ctx, second), errs.AlreadyExists)

	move(t, s, n.ID, nodestate.Inspecting, nodestate.Ready, ready)
	move(t, s, n.ID, nodestate.Inspecting, nodestate.Ready, ready) // the activity retried after it committed
	wipes, err := s.ListWipes(ctx, "a", n.ID)
	if err != nil || len(wipes) != 2 || wipes[1].RunID != run.RunID || wipes[1].UsedAt == nil || wipes[0].UsedAt != nil {
		t.Fatalf("ListWipes = %+v, %v; want run-0's unused and %s's consumed", wipes, err, run.RunID)
	}

	// The same run cannot consume its wipe twice.
	move(t, s, n.ID, nodestate.Ready, nodestate.Inspecting, store.TransitionInfo{})
	move(t, s, n.ID, nodestate.Inspecting, nodestate.Cleaning, store.TransitionInfo{})
	err = s.Transition(ctx, "a", n.ID, nodestate.Cleaning, nodestate.Ready, ready)
	wantKind(t, "Transition(cleaning → ready) on a consumed wipe", err, errs.UnverifiedWipe)
	if got := stateOf(t, s, n.ID); got != nodestate.Cleaning {
		t.Errorf("state after a refused move = %s, want cleaning", got)
	}
}

// TestReadyRefusedInSQL: the database itself refuses a move into ready
// that consumes no fresh wipe record, whoever writes it.
func TestReadyRefusedInSQL(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	n, _ := wipedNode(t, s, site)
	var wipe string
	if err := s.Pool().QueryRow(ctx, "SELECT id FROM wipe_records WHERE node_id = $1", n.ID).Scan(&wipe); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE metal_nodes SET state = 'ready' WHERE id = $1`,
		`UPDATE metal_nodes SET state = 'ready', ready_by = (SELECT id FROM wipe_records WHERE node_id <> $1 LIMIT 1) WHERE id = $1`,
	} {
		if _, err := s.Pool().Exec(ctx, q, n.ID); err == nil {
			t.Errorf("%s succeeded, want the trigger to refuse it", q)
		}
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE metal_nodes SET state = 'ready', ready_by = $2 WHERE id = $1`, n.ID, wipe); err != nil {
		t.Fatalf("a move consuming the node's own fresh wipe = %v, want it allowed", err)
	}
	_, _ = s.Pool().Exec(ctx, `UPDATE metal_nodes SET state = 'cleaning' WHERE id = $1`, n.ID)
	if _, err := s.Pool().Exec(ctx, `UPDATE metal_nodes SET state = 'ready', ready_by = NULL WHERE id = $1`, n.ID); err == nil {
		t.Error("moving into ready again without a fresh wipe succeeded")
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE metal_nodes SET state = 'ready', ready_by = $2 WHERE id = $1`, n.ID, wipe); err == nil {
		t.Error("moving into ready again on a consumed wipe succeeded")
	}
}

// TestReadyExceptions: a move into ready without an attested wipe records
// an exception, only where the node's pool allows that exception.
func TestReadyExceptions(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	cases := []struct {
		agent     string
		policy    store.PoolPolicy
		exception store.WipeKind
		allowed   bool
		event     string
	}{
		{"bcd", store.PoolPolicy{}, store.WipeAllowUnverifiedRelease, false, ""},
		{"bcd", store.PoolPolicy{AllowUnverifiedRelease: true}, store.WipeAllowUnverifiedRelease, true, store.EventReleaseUnverified},
		{"none", store.PoolPolicy{}, store.WipeAllowUnverifiedRelease, false, ""},
		{"bcd", store.PoolPolicy{AllowUnverifiedRelease: true}, store.WipeAgentNone, false, ""},
		{"none", store.PoolPolicy{}, store.WipeAgentNone, true, ""},
		{"bcd", store.PoolPolicy{AllowUnverifiedRelease: true}, store.WipeAttested, false, ""},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%v/%s", tc.agent, tc.policy.AllowUnverifiedRelease, tc.exception), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			n := newNodeIn(t, s, site, tc.agent, tc.policy)
			info := store.TransitionInfo{Run: store.Run{WorkflowID: "metal/" + n.ID, RunID: "r"}, Exception: tc.exception}
			err := s.Transition(ctx, "a", n.ID, nodestate.Inspecting, nodestate.Ready, info)
			wipes, _ := s.ListWipes(ctx, "a", n.ID)
			if !tc.allowed {
				if !errs.Is(err, errs.UnverifiedWipe) || len(wipes) != 0 || stateOf(t, s, n.ID) != nodestate.Inspecting {
					t.Errorf("Transition(ready, %s) = %v with records %+v; want UNVERIFIED_WIPE, nothing recorded, still inspecting",
						tc.exception, err, wipes)
				}
				return
			}
			if err != nil || len(wipes) != 1 || wipes[0].Kind != tc.exception || wipes[0].Event != tc.event || wipes[0].UsedAt == nil {
				t.Errorf("Transition(ready, %s) = %v with records %+v; want ready and one consumed %s record (event %q)",
					tc.exception, err, wipes, tc.exception, tc.event)
			}
		})
	}
}

// startCommand records the start of step (a command of kind running on
// runsOn) of run r of node_x's workflow, and returns the command.
func startCommand(t *testing.T, s *store.Store, site store.Site, runsOn, kind, step string) store.Command {
	t.Helper()
	c := store.Command{ID: ids.New(ids.Command), TenantID: "a", NodeID: "node_x", SiteID: site.ID, Kind: kind,
		RunsOn: runsOn, WorkflowID: "metal/node_x", RunID: "r", Step: step}
	if err := s.StartCommand(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStartCommandTwice: the same start recorded again while sent is kept;
// a step recorded again after it finished is an error, not a silent no-op.
func TestStartCommandTwice(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	c := startCommand(t, s, site, "ramdisk", "disk.wipe", "06.disk.wipe")
	again := c
	again.ID = ids.New(ids.Command)
	if err := s.StartCommand(ctx, again); err != nil {
		t.Errorf("StartCommand(the same start while sent) = %v, want nil", err)
	}
	took, err := s.FinishCommand(ctx, c.WorkflowID, c.RunID, c.Step, store.CommandSucceeded, 1, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if took <= 0 || took > time.Minute {
		t.Errorf("FinishCommand(%s) took %v, want the time since StartCommand", c.Step, took)
	}
	if took, err := s.FinishCommand(ctx, c.WorkflowID, c.RunID, "99.never", store.CommandSucceeded, 1, "", ""); took != 0 || err != nil {
		t.Errorf("FinishCommand(a step never started) = %v, %v; want 0, nil", took, err)
	}
	wantKind(t, "StartCommand(a finished step again)", s.StartCommand(ctx, again), errs.AlreadyExists)
	other := again
	other.Kind = "deploy.image"
	other.Step = "07.disk.wipe"
	if err := s.StartCommand(ctx, other); err != nil {
		t.Fatal(err)
	}
	mismatch := c
	mismatch.Step = other.Step
	wantKind(t, "StartCommand(another kind under a sent step)", s.StartCommand(ctx, mismatch), errs.AlreadyExists)
	cmds, err := s.ListCommands(ctx, "a", "node_x")
	if err != nil || len(cmds) != 2 {
		t.Errorf("ListCommands = %d commands, %v; want 2", len(cmds), err)
	}
}

// TestStartCommandAfter: a command's start carries the outcome of the one
// before it, recorded first in the same transaction; a start refused as a
// step sent twice still records the outcome (it is the earlier command's).
func TestStartCommandAfter(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	first := startCommand(t, s, site, "site", "boot.setEntry", "01.boot.setEntry")
	second := first
	second.ID, second.Kind, second.Step = ids.New(ids.Command), "power.setPower", "02.power.setPower"
	took, err := s.StartCommandAfter(ctx, &store.CommandOutcome{WorkflowID: first.WorkflowID, RunID: first.RunID,
		Step: first.Step, Status: store.CommandSucceeded, Attempt: 2}, second)
	if err != nil || took <= 0 || took > time.Minute {
		t.Fatalf("StartCommandAfter = %v, %v; want the first command's time, nil", took, err)
	}
	failed := &store.CommandOutcome{WorkflowID: first.WorkflowID, RunID: first.RunID, Step: second.Step,
		Status: store.CommandFailed, ErrorKind: "DRIVER_ERROR", Error: "BMC unreachable"}
	again := first
	again.ID = ids.New(ids.Command)
	_, err = s.StartCommandAfter(ctx, failed, again)
	wantKind(t, "StartCommandAfter(a finished step again)", err, errs.AlreadyExists)
	cmds, err := s.ListCommands(ctx, "a", "node_x")
	if err != nil || len(cmds) != 2 {
		t.Fatalf("ListCommands = %+v, %v; want 2 commands", cmds, err)
	}
	got := map[string]string{}
	for _, c := range cmds {
		got[c.Step] = fmt.Sprintf("%s/%d/%s", c.Status, c.Attempt, c.ErrorKind)
	}
	want := map[string]string{first.Step: "succeeded/2/", second.Step: "failed/1/DRIVER_ERROR"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

// TestFailedWithUnstorableText: the reason a node failed is recorded even
// when it carries a NUL or invalid UTF-8 (a BMC's answer), so the move to
// failed never fails on it and leaves the node in its active state.
func TestFailedWithUnstorableText(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	n := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	reason := "DRIVER_ERROR: the BMC said \x00\xffboom"
	move(t, s, n.ID, nodestate.Inspecting, nodestate.Failed, store.TransitionInfo{Error: reason, Maintenance: true})
	got, err := s.GetNode(t.Context(), "a", n.ID)
	if err != nil || got.State != nodestate.Failed || got.LastError != "DRIVER_ERROR: the BMC said \\x00\uFFFDboom" {
		t.Errorf("node after failing with %q = %s, lastError %q, %v; want failed with the text made storable", reason, got.State, got.LastError, err)
	}
}

// TestWriteCommands: the command log's writes behind the runs keep each
// step's row right whatever their order and however often they come: a
// start after its outcome does not undo it, an outcome whose start was lost
// is written whole (and only whole), a step holding another kind is
// ALREADY_EXISTS while the batch's other writes land, the highest attempt
// stays, and the times are the run's.
func TestWriteCommands(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	cmd := func(step, kind, status string, sec int) store.Command {
		c := store.Command{ID: ids.New(ids.Command), TenantID: "a", NodeID: "node_x", SiteID: site.ID, Kind: kind,
			RunsOn: "site", WorkflowID: "metal/node_x", RunID: "r", Step: step, Status: status,
			StartedAt: at.Add(time.Duration(sec) * time.Second)}
		if status != store.CommandSent {
			end := c.StartedAt.Add(time.Second)
			c.FinishedAt = &end
		}
		return c
	}
	var w store.CommandWrites
	w.Sent(cmd("01.boot.setEntry", "boot.setEntry", store.CommandSent, 0))
	w.Ended(cmd("01.boot.setEntry", "boot.setEntry", store.CommandSucceeded, 0), false)
	w.Ended(cmd("02.power.setPower", "power.setPower", store.CommandSucceeded, 2), false) // its start was lost: nothing
	w.Sent(cmd("03.disk.wipe", "disk.wipe", store.CommandSent, 4))
	if err := s.WriteCommands(ctx, &w); err != nil {
		t.Fatalf("WriteCommands = %v", err)
	}
	// The writer's flushes need not write again an outcome that found its row.
	if got, want := w.Found(), []bool{true, false}; !slices.Equal(got, want) {
		t.Errorf("Found() = %v, want %v (the outcome with a row, the one without)", got, want)
	}
	if err := s.RecordAttempt(ctx, site.ID, "metal/node_x", "r", "03.disk.wipe", 3); err != nil {
		t.Fatal(err)
	}
	// The run's flush: everything whole, the lost start included, and the
	// starts the writer still held arriving after.
	var flush store.CommandWrites
	for _, c := range []store.Command{cmd("01.boot.setEntry", "boot.setEntry", store.CommandSucceeded, 0),
		cmd("02.power.setPower", "power.setPower", store.CommandSucceeded, 2),
		cmd("03.disk.wipe", "disk.wipe", store.CommandFailed, 4)} {
		flush.Ended(c, true)
	}
	flush.Sent(cmd("03.disk.wipe", "disk.wipe", store.CommandSent, 4))
	if err := s.WriteCommands(ctx, &flush); err != nil {
		t.Fatalf("WriteCommands(flush) = %v", err)
	}
	var clash store.CommandWrites
	clash.Ended(cmd("01.boot.setEntry", "power.setPower", store.CommandSucceeded, 6), true)
	clash.Sent(cmd("04.boot.clearEntry", "boot.clearEntry", store.CommandSent, 8))
	wantKind(t, "WriteCommands(a step of another kind)", s.WriteCommands(ctx, &clash), errs.AlreadyExists)
	cmds, err := s.ListCommands(ctx, "a", "node_x")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cmds {
		took := "-"
		if c.FinishedAt != nil {
			took = c.FinishedAt.Sub(c.StartedAt).String()
		}
		got[c.Step] = fmt.Sprintf("%s %s/%d %s %s", c.Kind, c.Status, c.Attempt, c.StartedAt.Sub(at), took)
	}
	want := map[string]string{
		"01.boot.setEntry":   "boot.setEntry succeeded/1 0s 1s",
		"02.power.setPower":  "power.setPower succeeded/1 2s 1s",
		"03.disk.wipe":       "disk.wipe failed/3 4s 1s",
		"04.boot.clearEntry": "boot.clearEntry sent/1 8s -",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}
