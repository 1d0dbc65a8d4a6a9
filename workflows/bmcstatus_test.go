package workflows_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestBMCStatusAttribute: what the site says of a failing BMC while a
// command waits on it becomes the run's BmcStatus search attribute, and
// the attribute is unset once a command to the BMC succeeds.
func TestBMCStatusAttribute(t *testing.T) {
	f := newFake("bcd", nodestate.Enrolling)
	const down = "BMC 10.0.0.5:443 unreachable since 17:02:11Z: connection refused"
	var got []string
	_, err := run(t, f, wf.Enroll, wf.Input{}, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil).Run(func(args mock.Arguments) {
			sa := args.Get(0).(temporal.SearchAttributes)
			v, _ := sa.GetKeyword(wf.BMCStatusAttribute) // "" when unset
			got = append(got, v)
		})
		inv := kinds.InspectOutput{}
		inv.Inventory.MACs = []string{"52:54:00:00:00:01"}
		env.OnActivity(kinds.BMCInspect, mock.Anything, mock.Anything).After(time.Minute).Return(inv, nil)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(wf.BMCStatusSignal, down) }, 10*time.Second)
	})
	if err != nil {
		t.Fatalf("Enroll = %v", err)
	}
	if diff := cmp.Diff([]string{down, ""}, got); diff != "" {
		t.Errorf("BmcStatus upserts (-want +got):\n%s", diff)
	}
}

// TestBMCStatusVersionAskedAtFirstReport: a run whose BMC answers never asks
// bmc-status-attribute's version, so its history has no Version marker and
// no TemporalChangeVersion upsert (an event and a visibility write of every
// run before); the first report from the site asks it, once.
func TestBMCStatusVersionAskedAtFirstReport(t *testing.T) {
	for _, reports := range []int{0, 2} {
		f := newFake("bcd", nodestate.Enrolling)
		asked := 0
		_, err := run(t, f, wf.Enroll, wf.Input{}, func(env *testsuite.TestWorkflowEnvironment) {
			env.OnGetVersion("bmc-status-attribute", workflow.DefaultVersion, 1).Return(workflow.Version(1)).
				Run(func(mock.Arguments) { asked++ })
			env.OnUpsertTypedSearchAttributes(mock.Anything).Return(nil)
			inv := kinds.InspectOutput{}
			inv.Inventory.MACs = []string{"52:54:00:00:00:01"}
			env.OnActivity(kinds.BMCInspect, mock.Anything, mock.Anything).After(time.Minute).Return(inv, nil)
			for i := range reports {
				env.RegisterDelayedCallback(func() {
					env.SignalWorkflow(wf.BMCStatusSignal, fmt.Sprintf("BMC 10.0.0.5:443 unreachable (%d)", i))
				}, time.Duration(10+i)*time.Second)
			}
		})
		if err != nil {
			t.Fatalf("Enroll with %d BMC reports = %v", reports, err)
		}
		if want := min(reports, 1); asked != want {
			t.Errorf("Enroll with %d BMC reports asked bmc-status-attribute's version %d times, want %d", reports, asked, want)
		}
	}
}
