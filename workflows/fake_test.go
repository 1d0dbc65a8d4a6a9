package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/worker"
	wf "github.com/better-compute/better-compute/workflows"
)

// fake is the world the workflows act on: the control plane's store (one
// node, its transitions, compare-and-set along the table) and the site with
// one machine whose ramdisk answers. It records every activity it runs, in
// order, and fails the ones named in fail.
type fake struct {
	mu          sync.Mutex
	node        kinds.NodeInfo
	disks       []string // what the ramdisk's inventory reports
	profile     kinds.Profile
	fail        map[string]error // activity name → error it returns
	failTimes   map[string]int   // activity name → how many of its calls fail with fail[name] (0: all)
	calls       []string         // activity names in order, commands bookkeeping aside
	transitions []kinds.TransitionInput
	power       []string                // power.setPower actions in order
	commands    []kinds.CommandRecord   // command.start, command.finish and command.queue records, and command.flush's outcomes
	recordCalls int                     // command.start, command.finish, command.queue and command.flush calls
	flushes     []kinds.CommandFlush    // command.flush calls
	ramdiskCmds []kinds.Command         // ramdisk commands as sent
	deployments []kinds.DeploymentInput // node.recordDeployment calls
	refusals    []kinds.RefusalInput    // node.recordRefusal calls
	verified    kinds.WipeAttestation   // what wipe.verify returns
	verifyIn    *kinds.VerifyWipeInput  // what wipe.verify was asked
	wipes       map[string]bool         // workflow/run → a verified wipe not yet consumed by a move into ready
	inputs      map[string][]any        // every activity's input by name
	hooks       map[string]func(in any) // run when the named activity starts
	steps       *sdk.Registry           // what profile.get resolves against and the control plane runs
}

func newFake(agent string, state nodestate.State) *fake {
	return &fake{
		node: kinds.NodeInfo{TenantID: "acme", NodeID: "node_1", SiteID: "site_1", PoolID: "pool_1", State: state,
			BMC:  kinds.BMCTarget{NodeID: "node_1", Address: "https://10.0.0.5", Driver: "redfish", CredentialsRef: "env://BMC"},
			MACs: []string{"52:54:00:00:00:01"}, Agent: agent},
		disks: []string{"wwn-0x1", "wwn-0x2"},
		profile: kinds.Profile{ID: "os", Version: 1, Role: "host", Steps: []kinds.ProfileStep{
			{Use: kinds.DeployImage, With: map[string]any{"image": "img_1"}}, {Use: kinds.BootKexec}}},
		verified: kinds.WipeAttestation{Mode: "quick", Disks: []string{"wwn-0x1", "wwn-0x2"}, Bytes: 2 << 20,
			Signer: "ramdisk/node_1 serial 1f", Verified: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
		fail:   map[string]error{},
		wipes:  map[string]bool{},
		inputs: map[string][]any{},
		hooks:  map[string]func(any){},
		steps:  builtins,
	}
}

// builtins is the registry of the built-in steps.
var builtins = func() *sdk.Registry {
	r, err := steps.Registry()
	if err != nil {
		panic(err)
	}
	return r
}()

// hit records a call of name with in and returns the error it must fail with.
func (f *fake) hit(name string, in any) error {
	f.mu.Lock()
	if !recordsCommands(name) {
		f.calls = append(f.calls, name)
	}
	f.inputs[name] = append(f.inputs[name], in)
	hook, err := f.hooks[name], f.fail[name]
	if n, limited := f.failTimes[name]; limited && err != nil {
		if n == 0 {
			err = nil
		} else {
			f.failTimes[name] = n - 1
		}
	}
	f.mu.Unlock()
	if hook != nil {
		hook(in)
	}
	return errs.ToTemporal(err)
}

// act wraps body as the activity name: recorded, failing on demand.
func act[I, O any](f *fake, name string, body func(I) (O, error)) func(context.Context, I) (O, error) {
	return func(_ context.Context, in I) (O, error) {
		if err := f.hit(name, in); err != nil {
			var zero O
			return zero, err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		out, err := body(in)
		return out, errs.ToTemporal(err)
	}
}

type none struct{}

// register registers every activity the workflows call under its name.
func (f *fake) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(name string, fn any) {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	reg(kinds.ActGetNode, act(f, kinds.ActGetNode, func(kinds.NodeRef) (kinds.NodeInfo, error) { return f.node, nil }))
	reg(kinds.ActTransition, act(f, kinds.ActTransition, f.transition))
	reg(kinds.ActRecordFacts, act(f, kinds.ActRecordFacts, func(in kinds.FactsInput) (none, error) {
		if len(in.Disks) > 0 {
			f.node.Disks = in.Disks
		}
		return none{}, nil
	}))
	reg(kinds.ActRecordDeployment, act(f, kinds.ActRecordDeployment, func(in kinds.DeploymentInput) (none, error) {
		f.deployments = append(f.deployments, in)
		return none{}, nil
	}))
	reg(kinds.ActRecordRefusal, act(f, kinds.ActRecordRefusal, func(in kinds.RefusalInput) (none, error) {
		f.refusals = append(f.refusals, in)
		return none{}, nil
	}))
	reg(kinds.ActIssueDiscovery, act(f, kinds.ActIssueDiscovery, func(kinds.DiscoveryInput) (string, error) {
		return fmt.Sprintf("bcdisc_test%d", len(f.inputs[kinds.ActIssueDiscovery])), nil
	}))
	reg(kinds.ActVerifyWipe, act(f, kinds.ActVerifyWipe, func(in kinds.VerifyWipeInput) (kinds.WipeAttestation, error) {
		f.verifyIn = &in
		f.wipes[in.WorkflowID+"/"+in.RunID] = true
		return f.verified, nil
	}))
	reg(kinds.ActGetImage, act(f, kinds.ActGetImage, func(in kinds.ImageInput) (kinds.EnsureImageInput, error) {
		return kinds.EnsureImageInput{ImageID: in.ImageID, Source: "https://images.test/os.raw.zst", Digest: "sha256:ab",
			Compression: "zstd", Size: 1 << 20}, nil
	}))
	reg(kinds.ActGetProfile, act(f, kinds.ActGetProfile, f.getProfile))
	reg(kinds.ActRevokeIdentity, act(f, kinds.ActRevokeIdentity, func(kinds.DeploymentInput) (none, error) { return none{}, nil }))
	reg(kinds.ActStartCommand, act(f, kinds.ActStartCommand, f.record))
	reg(kinds.ActFinishCommand, act(f, kinds.ActFinishCommand, f.record))
	reg(kinds.ActQueueCommand, f.queue)
	reg(kinds.ActFlushCommands, act(f, kinds.ActFlushCommands, f.flush))
	f.registerSite(reg)
	acts := &controlplane.Activities{Steps: f.steps}
	if err := acts.RegisterSteps(env); err != nil {
		panic(err)
	}
}

func (f *fake) registerSite(reg func(string, any)) {
	reg(kinds.PowerSetPower, act(f, kinds.PowerSetPower, func(in kinds.SetPowerInput) (kinds.SetPowerOutput, error) {
		f.power = append(f.power, string(in.Action))
		return kinds.SetPowerOutput{}, nil
	}))
	reg(kinds.ManagementSetBootDevice, act(f, kinds.ManagementSetBootDevice, func(kinds.SetBootDeviceInput) (none, error) { return none{}, nil }))
	reg(kinds.BMCInspect, act(f, kinds.BMCInspect, func(kinds.InspectInput) (kinds.InspectOutput, error) {
		out := kinds.InspectOutput{}
		out.Inventory.MACs = []string{"52:54:00:00:00:01"}
		out.Inventory.ProductUUID = "8f2c6a2e-0000-4000-8000-000000000001"
		return out, nil
	}))
	reg(kinds.MediaInsert, act(f, kinds.MediaInsert, func(kinds.MediaInsertInput) (none, error) { return none{}, nil }))
	reg(kinds.MediaEject, act(f, kinds.MediaEject, func(kinds.MediaEjectInput) (none, error) { return none{}, nil }))
	reg(kinds.BootSetEntry, act(f, kinds.BootSetEntry, func(kinds.BootEntry) (none, error) { return none{}, nil }))
	reg(kinds.BootClearEntry, act(f, kinds.BootClearEntry, func(kinds.ClearEntryInput) (none, error) { return none{}, nil }))
	reg(kinds.CacheEnsureImage, act(f, kinds.CacheEnsureImage, func(in kinds.EnsureImageInput) (kinds.EnsureImageOutput, error) {
		return kinds.EnsureImageOutput{Path: "/cache/sha256/ab", Size: in.Size}, nil
	}))
	for _, k := range ramdiskKinds() {
		reg(k, act(f, k, f.ramdisk))
	}
}

// ramdiskKinds are the built-in steps relayed to a ramdisk, the
// lifecycle's own commands included.
func ramdiskKinds() []string {
	var out []string
	for _, s := range steps.Builtins().Steps {
		if s.RunsOn == sdk.Ramdisk {
			out = append(out, s.ID)
		}
	}
	return out
}

// getProfile resolves f.profile against f.steps as the control plane's
// profile.get does.
func (f *fake) getProfile(kinds.ProfileInput) (kinds.Profile, error) {
	doc := provision.Profile{ID: f.profile.ID, Version: f.profile.Version, Target: "metal", Role: f.profile.Role}
	for _, s := range f.profile.Steps {
		doc.Steps = append(doc.Steps, provision.Step{Use: s.Use, With: s.With})
	}
	return controlplane.PlanProfile(f.steps, doc)
}

// transition moves the node compare-and-set along the table, as the store does.
func (f *fake) transition(in kinds.TransitionInput) (none, error) {
	f.transitions = append(f.transitions, in)
	if f.node.State != in.From {
		return none{}, errs.New(errs.InvalidState, "node is %s, not %s", f.node.State, in.From)
	}
	if err := nodestate.Check(in.From, in.To); err != nil {
		return none{}, err
	}
	if in.To == nodestate.Ready {
		if err := f.consumeWipe(in); err != nil {
			return none{}, err
		}
	}
	f.node.State = in.To
	return none{}, nil
}

// consumeWipe is the store's rule for a move into ready: the run's own
// verified wipe, once, or an exception the pool allows.
func (f *fake) consumeWipe(in kinds.TransitionInput) error {
	run := in.WorkflowID + "/" + in.RunID
	switch {
	case in.Exception == kinds.ExceptionUnverifiedRelease && f.node.AllowUnverifiedRelease:
	case in.Exception == kinds.ExceptionAgentNone && f.node.Agent == kinds.AgentNone:
	case in.Exception == "" && f.wipes[run]:
		f.wipes[run] = false
	default:
		return errs.New(errs.UnverifiedWipe, "no attested wipe of run %s (exception %q)", run, in.Exception)
	}
	return nil
}

// recordsCommands: the activity name is one of the command log's.
func recordsCommands(name string) bool {
	return name == kinds.ActStartCommand || name == kinds.ActFinishCommand || name == kinds.ActQueueCommand ||
		name == kinds.ActFlushCommands
}

// queue is command.queue: it records what it is handed and answers the run
// it ran in, as the control plane's does.
func (f *fake) queue(ctx context.Context, q kinds.CommandQueue) (string, error) {
	if err := f.hit(kinds.ActQueueCommand, q); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordCalls++
	for _, c := range []*kinds.CommandRecord{q.Outcome, q.Start} {
		if c != nil {
			f.commands = append(f.commands, *c)
		}
	}
	return activity.GetInfo(ctx).WorkflowExecution.RunID, nil
}

// flush is command.flush: the commands it writes again are kept apart, its
// outcome is recorded.
func (f *fake) flush(fl kinds.CommandFlush) (none, error) {
	f.recordCalls++
	f.flushes = append(f.flushes, fl)
	if fl.Outcome != nil {
		f.commands = append(f.commands, *fl.Outcome)
	}
	return none{}, nil
}

func (f *fake) record(c kinds.CommandRecord) (none, error) {
	f.recordCalls++
	if c.Previous != nil { // recorded first, as the store does
		f.commands = append(f.commands, *c.Previous)
		c.Previous = nil
	}
	f.commands = append(f.commands, c)
	return none{}, nil
}

// ramdisk answers a relayed command as the machine's ramdisk would (the
// signature is wipe.verify's business, which this fake stubs).
func (f *fake) ramdisk(cmd kinds.Command) (kinds.Result, error) {
	f.ramdiskCmds = append(f.ramdiskCmds, cmd)
	var payload any = struct{}{}
	switch cmd.Kind {
	case kinds.InventoryRefresh:
		var inv kinds.Inventory
		for _, d := range f.disks {
			inv.Disks = append(inv.Disks, kinds.InventoryDisk{Name: d})
		}
		payload = inv
	case kinds.DeployImage:
		payload = kinds.DeployImageOutput{Disk: f.disks[0], BytesWritten: 1 << 20, Digest: "sha256:ab"}
	}
	b, _ := json.Marshal(payload)
	return kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: true, Payload: b}, nil
}

// run runs verb's workflow on f's node and returns its result and error.
func run(t *testing.T, f *fake, verb string, in wf.Input, setup ...func(*testsuite.TestWorkflowEnvironment)) (wf.Result, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: wf.WorkflowID(f.node.NodeID)})
	worker.RegisterWorkflows(env) // as the control plane's worker does
	f.register(env)
	for _, fn := range setup {
		fn(env)
	}
	in.TenantID, in.NodeID = f.node.TenantID, f.node.NodeID
	env.ExecuteWorkflow(verb, in)
	if !env.IsWorkflowCompleted() {
		t.Fatalf("%s did not complete", verb)
	}
	var res wf.Result
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&res); gerr != nil {
			t.Fatalf("%s result: %v", verb, gerr)
		}
	}
	return res, err
}

// ramdiskCalls returns the ramdisk kinds among calls.
func ramdiskCalls(calls []string) []string {
	var out []string
	for _, c := range calls {
		if slices.Contains(ramdiskKinds(), c) {
			out = append(out, c)
		}
	}
	return out
}
