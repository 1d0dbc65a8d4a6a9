package api

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	activitypb "go.temporal.io/api/activity/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// describing is a Temporal client that describes one workflow with the
// pending activities given, and whose visibility lists the running
// workflows given (keeping the query).
type describing struct {
	client.Client
	pending []*workflowpb.PendingActivityInfo
	running []*workflowpb.WorkflowExecutionInfo
	query   *string
}

func (d describing) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if d.query != nil {
		*d.query = req.Query
	}
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: d.running}, nil
}

func (d describing) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: d.pending}, nil
}

// TestNodeProgressShowsBMCAndRetries: a node whose command waits on a
// failing BMC shows the BMC's state from the command's heartbeat, and one
// whose command is retrying says so and why, from the last attempt's
// failure; a running attempt that reports progress shows the progress.
func TestNodeProgressShowsBMCAndRetries(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	beat := func(p kinds.Progress) *commonpb.Payloads {
		ps, err := dc.ToPayloads(p)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	const down = "BMC 10.0.0.5:623 unreachable since 17:02:11Z: BMC 10.0.0.5:623 did not answer in time"
	// As the site agent's failure converter sends them: the message encoded.
	failure := func(msg string) *failurepb.Failure {
		return codec.NewFailureConverter(dc).ErrorToFailure(temporal.NewApplicationError(msg, "DRIVER_ERROR"))
	}
	power := &commonpb.ActivityType{Name: kinds.PowerSetPower}
	tests := []struct {
		name string
		pa   *workflowpb.PendingActivityInfo
		want string
	}{
		{"waiting on a failing BMC", &workflowpb.PendingActivityInfo{ActivityId: "03.power.setPower", ActivityType: power,
			State: enumspb.PENDING_ACTIVITY_STATE_STARTED, Attempt: 1, HeartbeatDetails: beat(kinds.Progress{BMC: down})},
			"power.setPower: " + down},
		{"retrying", &workflowpb.PendingActivityInfo{ActivityId: "03.power.setPower", ActivityType: power,
			State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, Attempt: 3,
			LastFailure: failure("power.setPower: DRIVER_ERROR: " + down + " (the site agent sends it nothing until 17:02:41Z, then tries once)")},
			"power.setPower: retrying (attempt 3): DRIVER_ERROR: " + down + " (the site agent sends it nothing until 17:02:41Z, then tries once)"},
		{"a retry that progresses", &workflowpb.PendingActivityInfo{ActivityId: "07.deploy.image", ActivityType: &commonpb.ActivityType{Name: "deploy.image"},
			State: enumspb.PENDING_ACTIVITY_STATE_STARTED, Attempt: 2, LastFailure: failure("read error"),
			HeartbeatDetails: beat(kinds.Progress{Bytes: 3 << 20, Total: 8 << 20})},
			"deploy.image: 3 of 8 MiB"},
		{"no worker takes it", untaken(kinds.CacheEnsureImage, "site/site_1", 20*time.Second),
			"cache.ensureImage: no worker has taken it for 20s (is the agent of site site_1, bcd site, running and connected?)"},
		{"no worker takes it yet", untaken(kinds.CacheEnsureImage, "site/site_1", 2*time.Second), ""},
		{"no control-plane worker takes it", untaken(kinds.ActGetImage, "control-plane", 30*time.Second),
			"image.get: no worker has taken it for 30s (is a control plane's worker, serve, running?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{temporal: describing{pending: []*workflowpb.PendingActivityInfo{tt.pa}}, dc: dc}
			if got := nodeProgress(s.pendingOf(context.Background(), "node_1")); got != tt.want {
				t.Errorf("nodeProgress() = %q, want %q", got, tt.want)
			}
		})
	}
}

// untaken is a first attempt of kind on task queue q that no worker has
// taken for ago.
func untaken(kind, q string, ago time.Duration) *workflowpb.PendingActivityInfo {
	return &workflowpb.PendingActivityInfo{ActivityId: "01." + kind, ActivityType: &commonpb.ActivityType{Name: kind},
		State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, Attempt: 1, ScheduledTime: timestamppb.New(time.Now().Add(-ago)),
		ActivityOptions: &activitypb.ActivityOptions{TaskQueue: &taskqueuepb.TaskQueue{Name: q}}}
}

// TestListProgress: metal list shows what each active node's workflow
// waits on, and a resting node's when visibility lists a workflow running
// on it (a deploy fetching its image before the node moves); nothing for
// a node at rest.
func TestListProgress(t *testing.T) {
	pa := &workflowpb.PendingActivityInfo{ActivityId: "02.bmc.inspect", ActivityType: &commonpb.ActivityType{Name: kinds.BMCInspect},
		State: enumspb.PENDING_ACTIVITY_STATE_SCHEDULED, Attempt: 2, LastFailure: codec.NewFailureConverter(converter.GetDefaultDataConverter()).ErrorToFailure(
			temporal.NewApplicationError("bmc.inspect: DRIVER_ERROR: BMC 10.0.0.5:623 unreachable since 17:02:11Z: refused", "DRIVER_ERROR"))}
	node3, err := converter.GetDefaultDataConverter().ToPayload("node_3")
	if err != nil {
		t.Fatal(err)
	}
	var query string
	s := &Server{temporal: describing{pending: []*workflowpb.PendingActivityInfo{pa}, query: &query,
		running: []*workflowpb.WorkflowExecutionInfo{{SearchAttributes: &commonpb.SearchAttributes{
			IndexedFields: map[string]*commonpb.Payload{"NodeId": node3}}}}},
		dc: converter.GetDefaultDataConverter()}
	got := s.listProgress(context.Background(), "acme", []store.Node{{ID: "node_1", State: nodestate.Enrolling}, {ID: "node_2", State: nodestate.Ready},
		{ID: "node_3", State: nodestate.Ready}})
	const retrying = "bmc.inspect: retrying (attempt 2): DRIVER_ERROR: BMC 10.0.0.5:623 unreachable since 17:02:11Z: refused"
	want := map[string]string{"node_1": retrying, "node_3": retrying}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listProgress() (-want +got):\n%s", diff)
	}
	if want := "TenantId = 'acme' AND ExecutionStatus = 'Running'"; query != want {
		t.Errorf("listProgress asked visibility %q, want %q", query, want)
	}
}
