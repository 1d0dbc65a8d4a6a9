//go:build fakehw

package demo_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestAcceptance20Loops is the spec's acceptance in simulation: 20
// consecutive unattended deploy and release loops, a fresh single-use token
// per boot, and every transition into ready preceded by exactly one attested
// wipe in that workflow.
func TestAcceptance20Loops(t *testing.T) {
	const loops = 20
	d := start(t, 1)
	m := d.Rack.Machines()[0]
	ctx := ctxFor(t, 10*time.Minute)
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < loops; i++ {
		if err := d.DeployAndRelease(ctx, m.Name, id); err != nil {
			t.Fatalf("loop %d: %v", i+1, err)
		}
	}
	st, _ := d.Rack.State(m.Name)
	if want := 1 + 2*loops; st.RamdiskBoots != want || len(st.Tokens) != want {
		t.Errorf("ramdisk boots = %d with %d tokens, want %d", st.RamdiskBoots, len(st.Tokens), want)
	}
	seen := map[string]bool{}
	for _, tok := range st.Tokens {
		if seen[tok] || !strings.HasPrefix(tok, "bcdisc_") {
			t.Errorf("token %q reused or malformed: every boot needs a fresh single-use token", tok[:10])
		}
		seen[tok] = true
	}
	// Every workflow that moved the node into ready ran exactly one wipe and
	// exactly one attestation check; deploys ran none.
	intoReady := 0
	for _, run := range runs(t, d, id) {
		typ := run[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		wipes, verifies := countActivities(run, "disk.wipe"), countActivities(run, wf.ActVerifyWipe)
		switch typ {
		case wf.Enroll, wf.Undeploy:
			intoReady++
			if wipes != 1 || verifies != 1 {
				t.Errorf("%s ran %d disk.wipe and %d wipe.verify, want exactly 1 each", typ, wipes, verifies)
			}
			if run[len(run)-1].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
				t.Errorf("%s did not complete: %v", typ, run[len(run)-1].GetEventType())
			}
		case wf.Deploy:
			if wipes != 0 {
				t.Errorf("deploy ran %d wipes", wipes)
			}
		}
	}
	if intoReady != 1+loops {
		t.Errorf("workflows into ready = %d, want %d", intoReady, 1+loops)
	}
	// The same as a rule, whatever the workflow's name: the runs that moved
	// the node into ready are the runs whose attested wipe the store
	// consumed, one each, and each ran exactly one wipe and one check.
	checkWipes(t, d, id, 1+loops)
	consumed := map[string]bool{}
	wipeRecords, _ := d.CP.Store().ListWipes(ctx, "root", id)
	for _, w := range wipeRecords {
		consumed[w.RunID] = true
	}
	for _, run := range runs(t, d, id) {
		start := run[0].GetWorkflowExecutionStartedEventAttributes()
		wipes, verifies := countActivities(run, "disk.wipe"), countActivities(run, wf.ActVerifyWipe)
		if into := consumed[start.GetOriginalExecutionRunId()]; into && (wipes != 1 || verifies != 1) || !into && wipes != 0 {
			t.Errorf("%s run %s: into ready %v with %d disk.wipe and %d wipe.verify; want 1 and 1 into ready, else no wipe",
				start.GetWorkflowType().GetName(), start.GetOriginalExecutionRunId(), into, wipes, verifies)
		}
	}
	// A used discovery token does not admit anyone again.
	if len(st.Tokens) > 0 {
		err := rejoin(d, st.Tokens[0])
		if code(err) != "UNAUTHENTICATED" {
			t.Errorf("join with a used discovery token = %v (%s), want UNAUTHENTICATED", err, code(err))
		}
	}
}

func countActivities(run []*historypb.HistoryEvent, name string) int {
	n := 0
	for _, ev := range run {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// TestUnattestedRelease: a release whose wipe fails read-back on one disk
// ends failed with failedFrom releasing and maintenance on.
func TestUnattestedRelease(t *testing.T) {
	d := start(t, 1)
	m := d.Rack.Machines()[0]
	ctx := ctxFor(t, 3*time.Minute)
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: demoProfile, ProfileVersion: 1})); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "deployed", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.Rack.InjectWipeFault(m.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := d.API.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: id, Wipe: "quick"})); err != nil {
		t.Fatal(err)
	}
	err = d.Wait(ctx, m.Name, id, "ready", 2*time.Minute)
	n := node(t, d, id)
	if err == nil || n.State != "failed" || n.FailedFrom != "releasing" || !n.Maintenance || !strings.Contains(n.LastError, "UNVERIFIED_WIPE") {
		t.Errorf("unattested release = %v; node %s failedFrom %s maintenance %v lastError %q; want failed from releasing, maintenance, UNVERIFIED_WIPE",
			err, n.State, n.FailedFrom, n.Maintenance, n.LastError)
	}
	// recover wipes again; with the fault cleared the node is ready.
	if err := d.Rack.ClearWipeFault(m.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := d.API.Metal.Recover(ctx, connect.NewRequest(&v1.NodeVerbRequest{NodeId: id})); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 2*time.Minute); err != nil {
		t.Errorf("recover after the fault was cleared: %v", err)
	}
}
