package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/sdk"
)

// TestStepActivityPanic: a step's Run that panics fails like any other
// error of its step - final when the step is not retrySafe - where
// Temporal would have retried the activity's panic, running an unsafe
// step again.
func TestStepActivityPanic(t *testing.T) {
	for _, safe := range []bool{false, true} {
		s := sdk.Step{ID: "acme.flash", RunsOn: sdk.ControlPlane, Timeout: time.Minute, RetrySafe: safe,
			Run: func(context.Context, *sdk.Context, sdk.Values) (sdk.Values, error) { panic("index out of range") }}
		var ts testsuite.WorkflowTestSuite
		env := ts.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions((&Activities{}).StepActivity(s), activity.RegisterOptions{Name: s.ID})
		_, err := env.ExecuteActivity(s.ID, sdk.Call{Node: sdk.Node{ID: "node_1"}, Use: s.ID})
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.NonRetryable() == safe || !strings.Contains(err.Error(), "acme.flash panicked") {
			t.Errorf("retrySafe %v: a panicking acme.flash = %v, want an INTERNAL error naming it, final %v", safe, err, !safe)
		}
	}
}
