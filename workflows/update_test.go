package workflows_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
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
			seen := &scheduled{opts: map[string]workflow.ActivityOptions{}}
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{seen}})
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
			// The save retries as every control-plane activity of a verb does:
			// up to 10 attempts at most 30 s apart (the SDK's default interval
			// doubles to 100 s).
			if o, ok := seen.opts[kinds.ActUpdateBMC]; saved > 0 && (!ok || o.RetryPolicy == nil ||
				o.RetryPolicy.MaximumInterval != 30*time.Second || o.RetryPolicy.MaximumAttempts != 10) {
				t.Errorf("node.updateBMC scheduled with %+v, want up to 10 attempts at most 30s apart", o.RetryPolicy)
			}
		})
	}
}

// scheduled records the options each activity type was last scheduled
// with, by its workflow's outbound interceptor.
type scheduled struct {
	interceptor.WorkerInterceptorBase
	opts map[string]workflow.ActivityOptions
}

func (s *scheduled) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &scheduledIn{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, seen: s}
}

type scheduledIn struct {
	interceptor.WorkflowInboundInterceptorBase
	seen *scheduled
}

func (i *scheduledIn) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&scheduledOut{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, seen: i.seen})
}

type scheduledOut struct {
	interceptor.WorkflowOutboundInterceptorBase
	seen *scheduled
}

func (o *scheduledOut) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.seen.opts[activityType] = workflow.GetActivityOptions(ctx)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}
