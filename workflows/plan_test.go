package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	wf "github.com/better-compute/better-compute/workflows"
)

// acme is a plugin with control-plane steps: render outputs a URL a later
// media.insert reads with fromStep, wait is not ready until its third
// call, and once fails and must not run twice.
type acme struct {
	mu    sync.Mutex
	calls map[string][]sdk.Call
}

func (a *acme) plugin() sdk.Plugin {
	rec := func(c *sdk.Context, in sdk.Values) int {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.calls[c.Step] = append(a.calls[c.Step], sdk.Call{Node: c.Node, Step: c.Step, WorkflowID: c.WorkflowID, With: in, From: c.From})
		return len(a.calls[c.Step])
	}
	return sdk.Plugin{ID: "acme", Steps: []sdk.Step{
		{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute, RetrySafe: true, Outputs: []string{"url"},
			Input: sdk.Manifest{{Name: "name", Type: sdk.String, Required: true}},
			Run: func(_ context.Context, c *sdk.Context, in sdk.Values) (sdk.Values, error) {
				rec(c, in)
				return sdk.Values{"url": fmt.Sprintf("https://site/iso/%s/%s.iso", c.Node.ID, in.String("name"))}, nil
			}},
		{ID: "acme.wait", RunsOn: sdk.ControlPlane, Timeout: time.Hour, // NotReady retries even a step not retrySafe
			Run: func(_ context.Context, c *sdk.Context, in sdk.Values) (sdk.Values, error) {
				if rec(c, in) < 3 {
					return nil, sdk.NotReady(10 * time.Second)
				}
				return sdk.Values{}, nil
			}},
		{ID: "acme.once", RunsOn: sdk.ControlPlane, Timeout: time.Hour,
			Run: func(_ context.Context, c *sdk.Context, in sdk.Values) (sdk.Values, error) {
				rec(c, in)
				return nil, errs.New(errs.DriverError, "the installer answered badly")
			}},
	}}
}

func acmeFake(t *testing.T, ps ...kinds.ProfileStep) (*fake, *acme) {
	t.Helper()
	a := &acme{calls: map[string][]sdk.Call{}}
	reg, err := steps.Registry(a.plugin())
	if err != nil {
		t.Fatalf("steps.Registry(acme) = %v", err)
	}
	f := newFake("bcd", nodestate.Ready)
	f.steps = reg
	f.profile.Steps = ps
	return f, a
}

func TestDeployRunsPluginSteps(t *testing.T) {
	f, a := acmeFake(t,
		kinds.ProfileStep{Use: "acme.render", With: map[string]any{"name": "seed"}},
		kinds.ProfileStep{Use: kinds.MediaInsert, With: map[string]any{"fromStep": "acme.render"}},
		kinds.ProfileStep{Use: "acme.wait"},
		kinds.ProfileStep{Use: kinds.DeployImage, With: map[string]any{"image": "img_1"}},
		kinds.ProfileStep{Use: kinds.BootKexec})
	res, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1})
	if err != nil || res.State != nodestate.Deployed {
		t.Fatalf("Deploy = %+v, %v; want deployed", res, err)
	}
	// The fake's activities, the plugin's own Runs aside (a.calls).
	// The image is pinned at the site before the node moves.
	wantCalls := []string{kinds.ActGetNode, kinds.ActGetProfile, kinds.ActGetImage, kinds.CacheEnsureImage, kinds.ActTransition, kinds.MediaInsert, kinds.ActIssueDiscovery, kinds.BootSetEntry,
		kinds.ManagementSetBootDevice, kinds.PowerSetPower, kinds.DeployImage, kinds.BootSetEntry,
		kinds.ManagementSetBootDevice, kinds.BootKexec, kinds.ActRecordDeployment, kinds.ActTransition}
	if diff := cmp.Diff(wantCalls, f.calls); diff != "" {
		t.Errorf("Deploy activities (-want +got):\n%s", diff)
	}
	// render's output reached media.insert through fromStep, with the BMC.
	ins := f.inputs[kinds.MediaInsert][0].(kinds.MediaInsertInput)
	if want := "https://site/iso/node_1/seed.iso"; ins.URL != want || ins.BMC.Address != f.node.BMC.Address {
		t.Errorf("media.insert input = %+v, want url %s and the node's BMC", ins, want)
	}
	// Each step's id is its command's and its activity's, the same on every call.
	if got := len(a.calls["04.acme.wait"]); got != 3 {
		t.Errorf("acme.wait calls = %d (%v), want 3: not ready twice, then done", got, a.calls)
	}
	render := a.calls["02.acme.render"]
	if len(render) != 1 || render[0].Node.ID != "node_1" || render[0].WorkflowID != "metal/node_1" ||
		render[0].With.String("name") != "seed" {
		t.Errorf("acme.render calls = %+v, want one for node_1 in metal/node_1 with name seed", render)
	}
	if got := a.calls["04.acme.wait"][2].From["acme.render"].String("url"); !strings.HasSuffix(got, "seed.iso") {
		t.Errorf("acme.wait saw render's url %q, want the earlier step's outputs in From", got)
	}
	var steps []string
	for _, c := range f.commands {
		if c.Status != "" {
			steps = append(steps, c.Step+" "+c.RunsOn)
		}
	}
	want := []string{"01.cache.ensureImage site", "02.acme.render control-plane", "03.media.insert site", "04.acme.wait control-plane", "05.boot.setEntry site", "06.management.setBootDevice site", "07.power.setPower site",
		"08.deploy.image ramdisk", "09.boot.setEntry site", "10.management.setBootDevice site", "11.boot.kexec ramdisk"}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("command records (-want +got):\n%s", diff)
	}
	if id := f.ramdiskCmds[0].ID; !strings.HasSuffix(id, "/08") {
		t.Errorf("deploy.image command id = %s, want its step's number (08)", id)
	}
}

func TestDeployPluginStepFailures(t *testing.T) {
	t.Run("unknown step", func(t *testing.T) {
		f, _ := acmeFake(t, kinds.ProfileStep{Use: "acme.nope"})
		_, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1})
		if errs.FromTemporal(err) != errs.InvalidInput || !strings.Contains(err.Error(), `steps[0].use: unknown step "acme.nope"`) {
			t.Errorf("Deploy = %v, want INVALID_INPUT naming steps[0].use", err)
		}
		if f.node.State != nodestate.Ready || len(f.transitions) != 0 {
			t.Errorf("node %s after moves %q, want ready, unmoved", f.node.State, moves(f.transitions))
		}
	})
	t.Run("a step not retry-safe runs once", func(t *testing.T) {
		f, a := acmeFake(t, kinds.ProfileStep{Use: "acme.once"})
		_, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1})
		if errs.FromTemporal(err) != errs.DriverError || !strings.Contains(err.Error(), "the installer answered badly") {
			t.Errorf("Deploy = %v, want the step's DRIVER_ERROR", err)
		}
		if got := len(a.calls["01.acme.once"]); got != 1 {
			t.Errorf("acme.once ran %d times, want once (not retrySafe)", got)
		}
		if f.node.State != nodestate.Failed {
			t.Errorf("node %s, want failed", f.node.State)
		}
	})
}
