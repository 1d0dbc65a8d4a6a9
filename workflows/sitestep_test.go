package workflows_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	wf "github.com/better-compute/better-compute/workflows"
)

// A site step not retrySafe must not run again by itself: its Result makes
// its failures final, and its attempt's timeout must be the step's whole
// timeout, with no heartbeat timeout, so an attempt that times out (the
// site agent died under it) is not retried either. A retry-safe one has a
// heartbeat timeout: its agent's death costs that, not its timeout.
func TestDeploySiteStepNotRetrySafeTimesOutOnce(t *testing.T) {
	const timeout = 10 * time.Minute
	run1 := func(context.Context, *sdk.Context, sdk.Values) (sdk.Values, error) { return sdk.Values{}, nil }
	plugin := sdk.Plugin{ID: "acme", Steps: []sdk.Step{
		{ID: "acme.flash", RunsOn: sdk.Site, Timeout: timeout, Run: run1},
		{ID: "acme.blink", RunsOn: sdk.Site, Timeout: timeout, RetrySafe: true, Run: run1},
	}}
	reg, err := steps.Registry(plugin)
	if err != nil {
		t.Fatalf("steps.Registry(acme) = %v", err)
	}
	f := newFake("bcd", nodestate.Ready)
	f.steps = reg
	f.profile.Steps = []kinds.ProfileStep{{Use: "acme.flash"}, {Use: "acme.blink"}}
	got := map[string][2]time.Duration{}
	heartbeat := map[string]time.Duration{}
	site := func(name string) func(context.Context, sdk.Values) (sdk.Values, error) {
		return func(ctx context.Context, _ sdk.Values) (sdk.Values, error) {
			i := activity.GetInfo(ctx)
			got[name] = [2]time.Duration{i.StartToCloseTimeout, i.ScheduleToCloseTimeout}
			heartbeat[name] = i.HeartbeatTimeout
			return sdk.Values{}, nil
		}
	}
	res, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1}, func(env *testsuite.TestWorkflowEnvironment) {
		for _, name := range []string{"acme.flash", "acme.blink"} {
			env.RegisterActivityWithOptions(site(name), activity.RegisterOptions{Name: name})
		}
	})
	if err != nil || res.State != nodestate.Deployed {
		t.Fatalf("Deploy = %+v, %v; want deployed", res, err)
	}
	if g := got["acme.flash"]; g != [2]time.Duration{timeout, timeout} {
		t.Errorf("acme.flash (not retrySafe) start-to-close, schedule-to-close = %v, want %v both: a timed-out attempt is its last", g, timeout)
	}
	if g := got["acme.blink"]; g[0] != timeout {
		t.Errorf("acme.blink (retrySafe) start-to-close = %v, want %v", g[0], timeout)
	}
	// The site heartbeats a plugin's step while it runs: a retry-safe one
	// whose agent died is retried within its heartbeat timeout, not at
	// its own 10 minutes; one that is not gets none, its attempt its last.
	if hb := heartbeat["acme.blink"]; hb <= 0 || hb > 30*time.Second {
		t.Errorf("acme.blink (retrySafe) heartbeat timeout = %v, want one of at most 30s", hb)
	}
	if hb := heartbeat["acme.flash"]; hb != 0 {
		t.Errorf("acme.flash (not retrySafe) heartbeat timeout = %v, want none", hb)
	}
}
