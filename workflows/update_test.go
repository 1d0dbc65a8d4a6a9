package workflows_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestUpdateBMCChecksBeforeSaving: metal.update saves the new BMC settings
// only after the BMC answered them with the same machine; a refused login
// is one attempt and saves nothing, and a BMC that reports another
// machine's UUID is refused naming both.
func TestUpdateBMCChecksBeforeSaving(t *testing.T) {
	target := kinds.BMCTarget{NodeID: "node_1", Address: "https://10.0.0.6", Driver: "redfish", CredentialsRef: "secret://acme/bmc-2"}
	for _, tc := range []struct {
		name       string
		inspectErr error
		uuid       string
		wantKind   errs.Kind // "" is success
		wantTries  int
	}{
		{"answers", nil, "8f2c6a2e-0000-4000-8000-000000000001", "", 1},
		{"wrong password", errs.New(errs.Unauthenticated, "BMC 10.0.0.6 refused the login"), "", errs.Unauthenticated, 1},
		{"unreachable", errs.New(errs.DriverError, "BMC 10.0.0.6 unreachable"), "", errs.DriverError, 3},
		{"another machine", nil, "8f2c6a2e-0000-4000-8000-0000000000ff", errs.InvalidInput, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflowWithOptions(wf.UpdateBMCWorkflow, workflow.RegisterOptions{Name: wf.UpdateBMC})
			tries, saved := 0, 0
			env.RegisterActivityWithOptions(func(ctx context.Context, in kinds.InspectInput) (kinds.InspectOutput, error) {
				tries++
				if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb <= 0 || hb > time.Minute {
					t.Errorf("bmc.inspect heartbeat timeout = %v, want one of at most a minute (the site heartbeats a BMC call)", hb)
				}
				if in.BMC != target {
					t.Errorf("bmc.inspect target = %+v, want the new one %+v", in.BMC, target)
				}
				var out kinds.InspectOutput
				out.Inventory.ProductUUID = tc.uuid
				return out, errs.ToTemporal(tc.inspectErr)
			}, activity.RegisterOptions{Name: kinds.BMCInspect})
			env.RegisterActivityWithOptions(func(_ context.Context, in kinds.UpdateBMCInput) error {
				saved++
				return nil
			}, activity.RegisterOptions{Name: kinds.ActUpdateBMC})
			env.ExecuteWorkflow(wf.UpdateBMC, kinds.UpdateBMCInput{TenantID: "acme", NodeID: "node_1", SiteID: "site_1",
				State: "failed", ProductUUID: "8f2c6a2e-0000-4000-8000-000000000001", BMC: target})
			err := env.GetWorkflowError()
			if got := errs.FromTemporal(err); got != tc.wantKind {
				t.Fatalf("metal.update = %v (%s), want %q", err, got, tc.wantKind)
			}
			wantSaved := 0
			if tc.wantKind == "" {
				wantSaved = 1
			}
			if tries != tc.wantTries || saved != wantSaved {
				t.Errorf("bmc.inspect tried %d times, saved %d times; want %d and %d", tries, saved, tc.wantTries, wantSaved)
			}
		})
	}
}
