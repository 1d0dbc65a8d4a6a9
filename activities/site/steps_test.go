package site

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// names records the activity names registered.
type names struct {
	worker.ActivityRegistry // the other methods: unused
	got                     []string
}

func (n *names) RegisterActivity(any) { panic("unnamed") }
func (n *names) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	n.got = append(n.got, o.Name)
}

// TestRegisterServesTheRegistry: bcd site serves what its registry holds,
// the lifecycle's own commands included: every site step (ours typed, a
// plugin's by its Run) and every ramdisk step as a relayed command, and
// no control-plane step; a site step nobody can run is an error.
func TestRegisterServesTheRegistry(t *testing.T) {
	run := func(context.Context, *sdk.Context, sdk.Values) (sdk.Values, error) { return sdk.Values{}, nil }
	reg, err := steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{
		{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute, Run: run},
		{ID: "acme.write", RunsOn: sdk.Ramdisk, Timeout: time.Minute},
		{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var n names
	if err := (&Activities{}).Register(&n, reg); err != nil {
		t.Fatalf("Register = %v", err)
	}
	var want []string
	for _, s := range reg.Steps() {
		if s.RunsOn != sdk.ControlPlane {
			want = append(want, s.ID)
		}
	}
	slices.Sort(n.got)
	if !slices.Equal(n.got, want) {
		t.Errorf("Register registered %v, want the registry's site and ramdisk steps %v", n.got, want)
	}
	for _, k := range []string{kinds.DiskWipe, kinds.InventoryRefresh, kinds.BootSetEntry, kinds.CacheEnsureImage, "acme.flash", "acme.write"} {
		if !slices.Contains(n.got, k) {
			t.Errorf("Register did not register %s", k)
		}
	}

	reg, err = steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Activities{}).Register(&names{}, reg); err == nil || !strings.Contains(err.Error(), "acme.flash has no Run") {
		t.Errorf("Register(a site step without Run) = %v, want an error naming acme.flash", err)
	}
	bare, err := sdk.NewRegistry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute, Run: run}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Activities{}).Register(&names{}, bare); err == nil || !strings.Contains(err.Error(), "steps.Registry") {
		t.Errorf("Register(a registry without the built-ins) = %v, want an error saying to build it with steps.Registry", err)
	}
}

// TestRelayPluginRamdiskStep: a plugin's ramdisk step is relayed to the
// node's ramdisk like deploy.image; the site used to refuse any kind but
// its own six as INVALID_INPUT.
func TestRelayPluginRamdiskStep(t *testing.T) {
	reg, err := steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{{ID: "acme.write", RunsOn: sdk.Ramdisk, Timeout: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	relay := &oneResult{}
	a := &Activities{Relay: relay}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	if err := a.Register(env, reg); err != nil {
		t.Fatal(err)
	}
	res, err := env.ExecuteActivity("acme.write", kinds.Command{NodeID: "node_1", Kind: "acme.write", Payload: []byte(`{"x":1}`)})
	if err != nil {
		t.Fatalf("acme.write relayed = %v, want the ramdisk's result", err)
	}
	var got kinds.Result
	if err := res.Get(&got); err != nil || !got.OK || relay.kind != "acme.write" {
		t.Errorf("acme.write relayed = %+v, %v (the relay saw %q); want an OK result of acme.write", got, err, relay.kind)
	}
}

// TestSiteStepActivity: a plugin's site step gets its with values, the
// node from the BMC target, and its step id; NotReady asks for a retry.
func TestSiteStepActivity(t *testing.T) {
	var got *sdk.Context
	var in sdk.Values
	s := sdk.Step{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute, RetrySafe: true,
		Run: func(_ context.Context, c *sdk.Context, v sdk.Values) (sdk.Values, error) {
			got, in = c, v
			if v.String("firmware") == "later" {
				return nil, sdk.NotReady(time.Second)
			}
			return sdk.Values{"flashed": true}, nil
		}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(StepActivity(s), activity.RegisterOptions{Name: s.ID})
	bmc := kinds.BMCTarget{NodeID: "node_1", Address: "https://10.0.0.5", Driver: "redfish"}
	res, err := env.ExecuteActivity(s.ID, sdk.Values{"firmware": "2.1", "bmc": bmc})
	if err != nil {
		t.Fatalf("acme.flash = %v", err)
	}
	var out sdk.Values
	if err := res.Get(&out); err != nil || !out.Bool("flashed") {
		t.Errorf("acme.flash outputs = %v, %v", out, err)
	}
	if got.Node.ID != "node_1" || got.Node.BMCDriver != "redfish" || in.String("firmware") != "2.1" {
		t.Errorf("acme.flash ran with %+v, %v; want node_1 (redfish) and firmware 2.1", got, in)
	}
	_, err = env.ExecuteActivity(s.ID, sdk.Values{"firmware": "later", "bmc": bmc})
	if err == nil || !strings.Contains(err.Error(), steps.NotReadyType) {
		t.Errorf("acme.flash not ready = %v, want a %s error", err, steps.NotReadyType)
	}
}

// TestSiteStepHeartbeats: a plugin's site step heartbeats while its Run
// runs (every 5 s), so the heartbeat timeout the workflows give a
// retry-safe site step finds a site agent that died under it.
func TestSiteStepHeartbeats(t *testing.T) {
	t.Parallel()
	s := sdk.Step{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute, RetrySafe: true,
		Run: func(ctx context.Context, _ *sdk.Context, _ sdk.Values) (sdk.Values, error) {
			time.Sleep(heartbeatEvery + 500*time.Millisecond)
			return sdk.Values{}, nil
		}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(StepActivity(s), activity.RegisterOptions{Name: s.ID})
	var beats atomic.Int32
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	if _, err := env.ExecuteActivity(s.ID, sdk.Values{"bmc": kinds.BMCTarget{NodeID: "node_1", Driver: "redfish"}}); err != nil {
		t.Fatalf("acme.flash = %v", err)
	}
	if n := beats.Load(); n < 1 {
		t.Errorf("heartbeats of a site step that ran %v = %d, want at least 1 (one every %v)", heartbeatEvery+500*time.Millisecond, n, heartbeatEvery)
	}
}

// oneResult is a Relay whose ramdisk answers every command OK.
type oneResult struct{ kind string }

func (o *oneResult) Run(_ context.Context, cmd kinds.Command, _ func(kinds.Progress)) (kinds.Result, error) {
	o.kind = cmd.Kind
	return kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: true, Payload: []byte(`{}`)}, nil
}
