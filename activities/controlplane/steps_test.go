package controlplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// names records the activity names registered.
type names struct {
	worker.ActivityRegistry // the other methods: unused
	got                     []string
}

func (n *names) RegisterActivityWithOptions(_ any, o activity.RegisterOptions) {
	n.got = append(n.got, o.Name)
}

func TestRegisterStepsRefusesAStepWithoutRun(t *testing.T) {
	reg, err := steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{
		{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	err = (&Activities{Steps: reg}).RegisterSteps(&names{})
	if err == nil || !strings.Contains(err.Error(), "control-plane step acme.render has no Run") {
		t.Errorf("RegisterSteps(a control-plane step without Run) = %v, want an error naming acme.render", err)
	}
}

// TestStepActivityWithoutPKI: a step that issues a join token on a control
// plane started without a PKI fails UNSUPPORTED, final, saying so.
func TestStepActivityWithoutPKI(t *testing.T) {
	s := sdk.Step{ID: "acme.token", RunsOn: sdk.ControlPlane, Timeout: time.Minute, RetrySafe: true,
		Run: func(ctx context.Context, c *sdk.Context, _ sdk.Values) (sdk.Values, error) {
			_, err := c.PKI.IssueJoinToken(ctx, nil, c.Node, sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 1})
			return nil, err
		}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions((&Activities{}).StepActivity(s), activity.RegisterOptions{Name: s.ID})
	_, err := env.ExecuteActivity(s.ID, sdk.Call{Node: sdk.Node{ID: "node_1"}, Use: s.ID})
	if errs.FromTemporal(err) != errs.Unsupported || !strings.Contains(err.Error(), "(PKI)") {
		t.Errorf("acme.token without a PKI = %v, want UNSUPPORTED naming the PKI", err)
	}
}
