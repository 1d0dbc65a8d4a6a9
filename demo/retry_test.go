//go:build fakehw

package demo_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestRetryFromStep: a deploy whose machine's NIC is unplugged fails when
// its ramdisk boots stall (step k is the first boot's boot.setEntry); with
// the cable back, `workflows retry --from-step k` resets the failed run in
// Temporal: the steps before k ran exactly once (their results come from
// history), k and every step after it ran again in a new run of the same
// workflow id, and the node, moved from failed back to deploying, ends
// deployed. Refused before anything moves: a step not in the run, a kind
// the run has several of, another tenant's workflow, a completed run.
func TestRetryFromStep(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	d := startWith(t, func(c *demo.Config) { c.Machines, c.BootStall = 1, 2*time.Second })
	m := d.Rack.Machines()[0]
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.CP.Client().GetWorkflow(ctx, wf.WorkflowID(id), "").Get(ctx, nil); err != nil {
		t.Fatalf("enroll = %v", err)
	}
	if err := d.Rack.UnplugNIC(m.Name, true); err != nil {
		t.Fatal(err)
	}
	dep, err := callVerb(ctx, d, "deploy", id)
	if err != nil {
		t.Fatalf("metal.deploy = %v", err)
	}
	if workflowDone(t, d, dep) == nil {
		t.Fatal("the deploy with the NIC unplugged succeeded, want it failed")
	}
	if n := node(t, d, id); n.State != "failed" || n.FailedFrom != "deploying" {
		t.Fatalf("node after the stalled deploy = %s from %s, want failed from deploying", n.State, n.FailedFrom)
	}
	before := runCommands(t, d, id, dep.RunId)
	k := slices.IndexFunc(before, func(c *v1.Command) bool { return c.Kind == "boot.setEntry" })
	if k < 1 {
		t.Fatalf("the failed deploy's steps %v: want a boot.setEntry after a first step", stepsOf(before))
	}
	step := before[k].Step
	t.Logf("failed deploy ran %v; retrying from %s", stepsOf(before), step)

	t.Run("refused", func(t *testing.T) { testRetryRefused(t, d, id, dep) })

	if err := d.Rack.UnplugNIC(m.Name, false); err != nil {
		t.Fatal(err)
	}
	r, err := d.API.Workflows.Retry(ctx, connect.NewRequest(&v1.RetryWorkflowRequest{WorkflowId: dep.WorkflowId, FromStep: step}))
	if err != nil {
		t.Fatalf("workflows.retry --from-step %s = %v", step, err)
	}
	got := r.Msg
	if got.Workflow.GetWorkflowId() != dep.WorkflowId || got.Workflow.GetRunId() == dep.RunId || got.ResetRunId != dep.RunId ||
		got.FromStep != step || got.NodeState != "deploying" {
		t.Errorf("workflows.retry = %v, want a new run of %s from %s with the node deploying", got, dep.WorkflowId, step)
	}
	if err := d.CP.Client().GetWorkflow(ctx, dep.WorkflowId, got.Workflow.GetRunId()).Get(ctx, nil); err != nil {
		t.Fatalf("the retried deploy = %v", err)
	}
	if n := node(t, d, id); n.State != "deployed" {
		t.Errorf("node after the retried deploy = %s (%s), want deployed", n.State, n.LastError)
	}
	checkRetried(t, before, runCommands(t, d, id, got.Workflow.GetRunId()), step)
	checkOnce(t, d, id, before[:k], got.Workflow.GetRunId())

	_, err = d.API.Workflows.Retry(ctx, connect.NewRequest(&v1.RetryWorkflowRequest{WorkflowId: dep.WorkflowId, FromStep: step}))
	if code(err) != "INVALID_STATE" || !strings.Contains(err.Error(), "completed") {
		t.Errorf("workflows.retry of the completed run = %v (%s), want INVALID_STATE saying it completed", err, code(err))
	}
}

// testRetryRefused: each refusal leaves the failed node and its run as
// they are.
func testRetryRefused(t *testing.T, d *demo.Demo, id string, dep *v1.VerbResponse) {
	ctx := context.Background()
	retry := func(c bettercomputev1connect.WorkflowsServiceClient, step string) error {
		_, err := c.Retry(ctx, connect.NewRequest(&v1.RetryWorkflowRequest{WorkflowId: dep.WorkflowId, FromStep: step}))
		return err
	}
	err := retry(d.API.Workflows, "99.no.step")
	if code(err) != "NOT_FOUND" || !strings.Contains(err.Error(), "99.no.step") || !strings.Contains(err.Error(), "boot.setEntry") {
		t.Errorf("retry from a step not in the run = %v (%s), want NOT_FOUND naming it and listing the run's steps", err, code(err))
	}
	if err := retry(d.API.Workflows, "power.setPower"); code(err) != "INVALID_INPUT" || errField(err) != "fromStep" {
		t.Errorf("retry from a kind the run has 3 of = %v (%s %s), want INVALID_INPUT fromStep", err, code(err), errField(err))
	}
	if err := retry(d.API.Workflows, ""); code(err) != "INVALID_INPUT" || errField(err) != "fromStep" {
		t.Errorf("retry without a step = %v (%s %s), want INVALID_INPUT fromStep", err, code(err), errField(err))
	}
	root, err := os.ReadFile(d.CP.RootTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	tenants := bettercomputev1connect.NewTenantsServiceClient(http.DefaultClient, d.CP.APIURL(), connect.WithProtoJSON(),
		bearerAuth(strings.TrimSpace(string(root))))
	tr, err := tenants.Create(ctx, connect.NewRequest(&v1.CreateTenantRequest{Id: "retry-co"}))
	if err != nil {
		t.Fatalf("tenants.create = %v", err)
	}
	other := bettercomputev1connect.NewWorkflowsServiceClient(http.DefaultClient, d.CP.APIURL(), connect.WithProtoJSON(),
		bearerAuth(tr.Msg.Token))
	if err := retry(other, "boot.setEntry"); code(err) != "NOT_FOUND" {
		t.Errorf("retry of another tenant's workflow = %v (%s), want NOT_FOUND", err, code(err))
	}
	if n := node(t, d, id); n.State != "failed" || n.FailedFrom != "deploying" {
		t.Errorf("node after refused retries = %s from %s, want failed from deploying", n.State, n.FailedFrom)
	}
	w, err := d.API.Workflows.Get(ctx, connect.NewRequest(&v1.GetWorkflowRequest{WorkflowId: dep.WorkflowId}))
	if err != nil || w.Msg.Workflow.RunId != dep.RunId || w.Msg.Workflow.Status != "failed" {
		t.Errorf("workflow after refused retries = %v, %v; want run %s still failed", w, err, dep.RunId)
	}
}

// runCommands returns the commands run runID of node id sent, oldest first.
func runCommands(t *testing.T, d *demo.Demo, id, runID string) []*v1.Command {
	t.Helper()
	var out []*v1.Command
	for _, c := range commands(t, d, id) {
		if c.RunId == runID {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *v1.Command) int { return a.StartedAt.AsTime().Compare(b.StartedAt.AsTime()) })
	return out
}

func stepsOf(cs []*v1.Command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Step
	}
	return out
}

// checkRetried: the new run started again at step and sent again what the
// failed run sent from there to its first failed command (the stalled boot),
// then went on; it sent nothing from before step.
func checkRetried(t *testing.T, before, after []*v1.Command, step string) {
	t.Helper()
	k := slices.IndexFunc(before, func(c *v1.Command) bool { return c.Step == step })
	failed := slices.IndexFunc(before, func(c *v1.Command) bool { return c.Status == "failed" })
	if failed < k {
		t.Fatalf("the failed run's commands %v: no failed command after %s", stepsOf(before), step)
	}
	want, again := stepsOf(before[k:failed+1]), stepsOf(after)
	if len(again) < len(want) || !slices.Equal(again[:len(want)], want) {
		t.Errorf("the retried run's steps = %v, want them to start with %v", again, want)
	}
	t.Logf("the retried run ran %v", again)
}

// checkOnce: every step before the retried one was sent exactly once, by
// the failed run, and never by the retried run newRun.
func checkOnce(t *testing.T, d *demo.Demo, id string, kept []*v1.Command, newRun string) {
	t.Helper()
	all := commands(t, d, id)
	for _, c := range kept {
		n := 0
		for _, x := range all {
			if (x.RunId == c.RunId || x.RunId == newRun) && x.Step == c.Step {
				n++
			}
		}
		if n != 1 {
			t.Errorf("step %s (%s) ran %d times, want once: its result comes from history", c.Step, c.Kind, n)
		}
	}
}

// flakyStep is a plugin's control-plane step that fails until fixed,
// counting its runs; safe says whether it is retry-safe.
type flakyStep struct {
	id    string
	safe  bool
	runs  atomic.Int32
	fixed atomic.Bool
}

func (f *flakyStep) plugin() sdk.Plugin {
	return sdk.Plugin{ID: "retry-test", Steps: []sdk.Step{{ID: f.id, RunsOn: sdk.ControlPlane, RetrySafe: f.safe,
		Timeout: time.Minute, Doc: "marks the machine; fails until the test fixes it",
		Run: func(context.Context, *sdk.Context, sdk.Values) (sdk.Values, error) {
			f.runs.Add(1)
			if !f.fixed.Load() {
				return nil, errs.New(errs.DriverError, "the mark did not take")
			}
			return sdk.Values{}, nil
		}}}}
}

// readyWith starts a demo of one machine whose control plane runs step,
// enrolls the machine and registers profile (deploy.image, step,
// boot.kexec); it returns the node once ready.
func readyWith(ctx context.Context, t *testing.T, step *flakyStep, profile string) (*demo.Demo, string) {
	t.Helper()
	d := startWith(t, func(c *demo.Config) { c.Machines, c.Plugins = 1, []sdk.Plugin{step.plugin()} })
	m := d.Rack.Machines()[0]
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.CP.Client().GetWorkflow(ctx, wf.WorkflowID(id), "").Get(ctx, nil); err != nil {
		t.Fatalf("enroll = %v", err)
	}
	with, _ := structpb.NewStruct(map[string]any{"image": d.ImageID})
	if _, err := d.API.Profiles.Create(ctx, connect.NewRequest(&v1.CreateProfileRequest{Profile: &v1.Profile{
		Id: profile, Version: 1, Target: "metal", Role: "host",
		Steps: []*v1.ProfileStep{{Use: "deploy.image", With: with}, {Use: step.id}, {Use: "boot.kexec"}}}})); err != nil {
		t.Fatalf("profiles.create = %v", err)
	}
	return d, id
}

// TestRetryNotRetrySafe: a deploy whose plugin control-plane step (not
// retrySafe) fails ends failed; retrying from it is INVALID_STATE naming
// --force, and nothing moves; with --force it runs again (twice in all),
// deploy.image before it is not sent again, and the node ends deployed.
func TestRetryNotRetrySafe(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	flaky := &flakyStep{id: "retrytest.mark"}
	d, id := readyWith(ctx, t, flaky, "marked-os")
	dep, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: "marked-os", ProfileVersion: 1}))
	if err != nil {
		t.Fatalf("metal.deploy = %v", err)
	}
	if workflowDone(t, d, dep.Msg) == nil {
		t.Fatal("the deploy whose mark fails succeeded, want it failed")
	}
	if n := node(t, d, id); n.State != "failed" || n.FailedFrom != "deploying" || flaky.runs.Load() != 1 {
		t.Fatalf("after the failed mark: node %s from %s, mark ran %d times; want failed from deploying, once",
			n.State, n.FailedFrom, flaky.runs.Load())
	}
	retry := func(force bool) (*v1.RetryWorkflowResponse, error) {
		r, err := d.API.Workflows.Retry(ctx, connect.NewRequest(&v1.RetryWorkflowRequest{WorkflowId: dep.Msg.WorkflowId,
			FromStep: "retrytest.mark", Force: force}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	flaky.fixed.Store(true)
	if _, err := retry(false); code(err) != "INVALID_STATE" || !strings.Contains(err.Error(), "--force") ||
		!strings.Contains(err.Error(), "retrytest.mark") {
		t.Errorf("retry from a step not retry-safe = %v (%s), want INVALID_STATE naming it and --force", err, code(err))
	}
	if n := node(t, d, id); n.State != "failed" || flaky.runs.Load() != 1 {
		t.Errorf("after the refused retry: node %s, mark ran %d times; want failed, once", n.State, flaky.runs.Load())
	}
	got, err := retry(true)
	if err != nil {
		t.Fatalf("retry --force = %v", err)
	}
	if err := d.CP.Client().GetWorkflow(ctx, dep.Msg.WorkflowId, got.Workflow.GetRunId()).Get(ctx, nil); err != nil {
		t.Fatalf("the retried deploy = %v", err)
	}
	if n := node(t, d, id); n.State != "deployed" || flaky.runs.Load() != 2 {
		t.Errorf("after retry --force: node %s (%s), mark ran %d times; want deployed, twice", n.State, n.LastError, flaky.runs.Load())
	}
	before := runCommands(t, d, id, dep.Msg.RunId)
	k := slices.IndexFunc(before, func(c *v1.Command) bool { return c.Step == got.FromStep })
	if k < 1 || before[k].Kind != "retrytest.mark" {
		t.Fatalf("the failed run's commands %v: want %s (retrytest.mark) after others", stepsOf(before), got.FromStep)
	}
	checkOnce(t, d, id, before[:k], got.Workflow.GetRunId())
	t.Logf("failed run %v; retried from %s: %v", stepsOf(before), got.FromStep, stepsOf(runCommands(t, d, id, got.Workflow.GetRunId())))
}

// TestRetryStuckRun: a deploy whose retry-safe plugin step keeps failing
// is stuck, not failed: its node stays deploying. While nothing fails the
// run is healthy and a retry is INVALID_STATE; once the step retries,
// `workflows retry --from-step` resets the running run (it ends
// terminated, its step's command aborted) and the new run, under the same
// id, runs the step again and ends deployed, deploy.image before it sent
// once.
func TestRetryStuckRun(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	settle := &flakyStep{id: "retrytest.settle", safe: true}
	d, id := readyWith(ctx, t, settle, "settled-os")
	dep, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: "settled-os", ProfileVersion: 1}))
	if err != nil {
		t.Fatalf("metal.deploy = %v", err)
	}
	retry := func() (*v1.RetryWorkflowResponse, error) {
		r, err := d.API.Workflows.Retry(ctx, connect.NewRequest(&v1.RetryWorkflowRequest{WorkflowId: dep.Msg.WorkflowId,
			FromStep: settle.id}))
		if err != nil {
			return nil, err
		}
		return r.Msg, nil
	}
	if _, err := retry(); code(err) != "INVALID_STATE" || !strings.Contains(err.Error(), "none of its steps is failing") {
		t.Errorf("retry of a healthy running deploy = %v (%s), want INVALID_STATE saying none of its steps is failing", err, code(err))
	}
	for deadline := time.Now().Add(time.Minute); settle.runs.Load() < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s ran %d times in a minute, want it retried", settle.id, settle.runs.Load())
		}
	}
	got, err := retry()
	if err != nil {
		t.Fatalf("retry of the stuck deploy = %v", err)
	}
	settle.fixed.Store(true)
	if got.Workflow.GetWorkflowId() != dep.Msg.WorkflowId || got.ResetRunId != dep.Msg.RunId || got.NodeState != "deploying" {
		t.Errorf("workflows.retry = %v, want a new run of %s, the node deploying", got, dep.Msg.WorkflowId)
	}
	if err := d.CP.Client().GetWorkflow(ctx, dep.Msg.WorkflowId, got.Workflow.GetRunId()).Get(ctx, nil); err != nil {
		t.Fatalf("the retried deploy = %v", err)
	}
	old, err := d.API.Workflows.Get(ctx, connect.NewRequest(&v1.GetWorkflowRequest{WorkflowId: dep.Msg.WorkflowId, RunId: dep.Msg.RunId}))
	if err != nil || old.Msg.Workflow.Status != "terminated" {
		t.Errorf("the stuck run after the retry = %v, %v; want terminated", old, err)
	}
	if n := node(t, d, id); n.State != "deployed" {
		t.Errorf("node after the retried deploy = %s (%s), want deployed", n.State, n.LastError)
	}
	before := runCommands(t, d, id, dep.Msg.RunId)
	k := slices.IndexFunc(before, func(c *v1.Command) bool { return c.Step == got.FromStep })
	if k < 1 {
		t.Fatalf("the stuck run's commands %v: want %s after others", stepsOf(before), got.FromStep)
	}
	if c := before[k]; c.Status != "aborted" || !strings.Contains(c.Error, "workflows retry") || c.Attempt < 2 {
		t.Errorf("the stuck run's %s after the retry = %s (attempt %d) %q; want aborted by workflows retry after its retries",
			c.Step, c.Status, c.Attempt, c.Error)
	}
	checkOnce(t, d, id, before[:k], got.Workflow.GetRunId())
	t.Logf("stuck run %v; retried from %s: %v; %s ran %d times", stepsOf(before), got.FromStep,
		stepsOf(runCommands(t, d, id, got.Workflow.GetRunId())), settle.id, settle.runs.Load())
}
