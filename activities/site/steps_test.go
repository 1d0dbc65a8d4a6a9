package site

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
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

func TestRegisterSteps(t *testing.T) {
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
	if err := (&Activities{}).RegisterSteps(&n, reg); err != nil {
		t.Fatalf("RegisterSteps = %v", err)
	}
	// The built-in site and ramdisk steps are Register's; the control-plane
	// step is not the site's.
	slices.Sort(n.got)
	if want := []string{"acme.flash", "acme.write"}; !slices.Equal(n.got, want) {
		t.Errorf("RegisterSteps registered %v, want %v", n.got, want)
	}

	reg, err = steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Activities{}).RegisterSteps(&names{}, reg); err == nil || !strings.Contains(err.Error(), "acme.flash has no Run") {
		t.Errorf("RegisterSteps(a site step without Run) = %v, want an error naming acme.flash", err)
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
