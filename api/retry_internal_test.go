package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/store"
)

var runOf = []runStep{
	{id: "01.cache.ensureImage", kind: "cache.ensureImage", queue: "site/s1"},
	{id: "02.power.setPower", kind: "power.setPower", queue: "site/s1"},
	{id: "03.autoinstall.renderIso", kind: "autoinstall.renderIso", queue: "control-plane"},
	{id: "04.power.setPower", kind: "power.setPower", queue: "site/s1"},
	{id: "05.acme.flash", kind: "acme.flash", queue: "site/s1"},
}

func TestPickStep(t *testing.T) {
	for _, tt := range []struct {
		name, kind, field, says string
		want                    int
	}{
		{name: "04.power.setPower", want: 3},
		{name: "autoinstall.renderIso", want: 2},
		{name: "power.setPower", kind: "INVALID_INPUT", field: "fromStep", says: "02.power.setPower, 04.power.setPower"},
		{name: "06.media.eject", kind: "NOT_FOUND", says: `"06.media.eject" is not in run r1 of metal/n: its steps: 01.cache.ensureImage, 02.power.setPower`},
	} {
		got, err := pickStep(runOf, tt.name, "metal/n", "r1")
		if tt.kind == "" {
			if err != nil || got != tt.want {
				t.Errorf("pickStep(%s) = %d, %v; want %d", tt.name, got, err, tt.want)
			}
			continue
		}
		e, _ := errs.Own(err, "")
		if errs.KindOf(err) != errs.Kind(tt.kind) || e.Field != tt.field || !strings.Contains(strings.ReplaceAll(err.Error(), ";", ":"), tt.says) {
			t.Errorf("pickStep(%s) = %v; want %s %s saying %q", tt.name, err, tt.kind, tt.field, tt.says)
		}
	}
}

// TestUnsafeSteps: built-ins as the registry declares them, the rest as
// the workers published them; a control-plane step known to neither needs
// --force, a lifecycle site command does not.
func TestUnsafeSteps(t *testing.T) {
	for _, tt := range []struct {
		name      string
		published map[string]bool
		want      []string
	}{
		{"nothing published", nil, []string{"03.autoinstall.renderIso"}},
		{"published retry-safe", map[string]bool{"control-plane/autoinstall.renderIso": true}, nil},
		{"published unsafe on the site", map[string]bool{"control-plane/autoinstall.renderIso": true, "site/acme.flash": false},
			[]string{"05.acme.flash"}},
		{"a site's step is not the control plane's", map[string]bool{"site/autoinstall.renderIso": true},
			[]string{"03.autoinstall.renderIso"}},
	} {
		if diff := cmp.Diff(tt.want, unsafeSteps(builtins, runOf, tt.published)); diff != "" {
			t.Errorf("%s: unsafeSteps() -want +got:\n%s", tt.name, diff)
		}
	}
	if got := unsafeSteps(builtins, runOf[3:], nil); got != nil {
		t.Errorf("unsafeSteps(from 04) = %v, want none: the unsafe step before is not run again", got)
	}
	// An API built with the plugin knows what its steps declared, published or not.
	withPlugin, err := sdk.NewRegistry(steps.Builtins(), sdk.Plugin{ID: "autoinstall", Steps: []sdk.Step{
		{ID: "autoinstall.renderIso", RunsOn: sdk.ControlPlane, Timeout: time.Minute, RetrySafe: true},
		{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"05.acme.flash"}, unsafeSteps(withPlugin, runOf, nil)); diff != "" {
		t.Errorf("unsafeSteps(the API's own plugin) -want +got:\n%s", diff)
	}
}

func TestCheckRetryable(t *testing.T) {
	describe := func(st enumspb.WorkflowExecutionStatus, pending ...*workflowpb.PendingActivityInfo) *workflowservice.DescribeWorkflowExecutionResponse {
		return &workflowservice.DescribeWorkflowExecutionResponse{PendingActivities: pending,
			WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: st}}
	}
	for _, tt := range []struct {
		name string
		d    *workflowservice.DescribeWorkflowExecutionResponse
		want errs.Kind
	}{
		{"running, its step on its first attempt", describe(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, &workflowpb.PendingActivityInfo{Attempt: 1}), errs.InvalidState},
		{"running, nothing pending", describe(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING), errs.InvalidState},
		{"stuck: its step retrying", describe(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, &workflowpb.PendingActivityInfo{Attempt: 1},
			&workflowpb.PendingActivityInfo{Attempt: 4, LastFailure: &failurepb.Failure{Message: "x"}}), ""},
		{"running, its step waiting (NotReady)", describe(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, &workflowpb.PendingActivityInfo{Attempt: 9,
			LastFailure: &failurepb.Failure{Message: "wait.agentJoined: not ready", FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
				ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: steps.NotReadyType}}}}), errs.InvalidState},
		{"completed", describe(enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED), errs.InvalidState},
		{"failed", describe(enumspb.WORKFLOW_EXECUTION_STATUS_FAILED), ""},
		{"aborted", describe(enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED), ""},
		{"terminated", describe(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED), ""},
	} {
		if got := errs.KindOf(checkRetryable(tt.d)); tt.want != "" && got != tt.want || tt.want == "" && checkRetryable(tt.d) != nil {
			t.Errorf("%s: checkRetryable() = %v, want %q", tt.name, checkRetryable(tt.d), tt.want)
		}
	}
}

// TestNodeBackRefuses: a node the run does not leave where it is, other
// than failed, or a run that was in a resting state at the step, is
// INVALID_STATE before the store is touched (this server has none).
func TestNodeBackRefuses(t *testing.T) {
	s := workflows{&Server{}}
	for _, tt := range []struct {
		node, at nodestate.State
	}{
		{nodestate.Deployed, nodestate.Deploying},
		{nodestate.Failed, nodestate.Ready},
		{nodestate.Cleaning, nodestate.Inspecting},
	} {
		_, err := s.nodeBack(context.Background(), store.Node{ID: "node_1", State: tt.node}, runStep{id: "03.power.setPower", state: tt.at})
		if errs.KindOf(err) != errs.InvalidState {
			t.Errorf("nodeBack(node %s, run %s at the step) = %v, want INVALID_STATE", tt.node, tt.at, err)
		}
	}
	undo, err := s.nodeBack(context.Background(), store.Node{ID: "node_1", State: nodestate.Deploying}, runStep{state: nodestate.Deploying})
	if err != nil || undo == nil {
		t.Errorf("nodeBack(a stuck node where its run is) = %v, want nothing to move", err)
	}
}
