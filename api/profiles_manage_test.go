package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

const (
	profGet    = "/bettercompute.v1.ProfilesService/Get"
	profList   = "/bettercompute.v1.ProfilesService/List"
	profRender = "/bettercompute.v1.ProfilesService/Render"
	profUpdate = "/bettercompute.v1.ProfilesService/Update"
	profDelete = "/bettercompute.v1.ProfilesService/Delete"
	deploy     = "/bettercompute.v1.MetalService/Deploy"
)

// running is a Temporal client whose visibility lists the workflows given
// (whatever the query, which it keeps) and which runs no node's workflow.
type running struct {
	client.Client
	list    []*workflowpb.WorkflowExecutionInfo
	query   *string
	started *[]string
}

func (r running) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	*r.query = req.Query
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: r.list}, nil
}

// ExecuteWorkflow keeps what it was asked to start.
func (r running) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	*r.started = append(*r.started, fmt.Sprintf("%s %s %+v", opts.ID, workflow, args))
	return startedRun{id: opts.ID}, nil
}

type startedRun struct {
	client.WorkflowRun
	id string
}

func (r startedRun) GetID() string  { return r.id }
func (startedRun) GetRunID() string { return "run-1" }

func (running) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("no workflow")
}

// deployRun is a running deploy of node by tenant with profile id v1.
func deployRun(t *testing.T, tenant, node, id string) *workflowpb.WorkflowExecutionInfo {
	dc := converter.GetDefaultDataConverter()
	fields := map[string]*commonpb.Payload{}
	for k, v := range map[string]any{"TenantId": tenant, "NodeId": node, "ProfileId": id, "ProfileVersion": int64(1)} {
		p, err := dc.ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		fields[k] = p
	}
	return &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: "metal-" + node, RunId: "r1"},
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}
}

// TestProfilesAcrossTenants: a private profile is NOT_FOUND to another
// tenant; once public it is readable, renderable and deployable by every
// tenant and changed or deleted only by its owner; render shows the plan;
// delete is refused while a workflow runs it.
func TestProfilesAcrossTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var query string
	var started []string
	tc := &running{query: &query, started: &started}
	e := twoTenants(t, tc)
	s := e.store

	steps := `[{"use":"power.setPower","with":{"action":"cycle"}},{"use":"management.setBootDevice","with":{"device":"pxe"}}]`
	for v := 1; v <= 2; v++ {
		e.ok(e.root, profCreate, fmt.Sprintf(`{"profile":{"id":"cycle","version":%d,"target":"metal","role":"host","steps":%s}}`, v, steps))
	}
	node := acmeNode(t, s)
	for _, c := range []struct{ name, procedure, body string }{
		{"get", profGet, `{"id":"cycle","version":1}`},
		{"render", profRender, `{"id":"cycle","profileVersion":1}`},
		{"update", profUpdate, `{"id":"cycle","visibility":"public"}`},
		{"delete", profDelete, `{"id":"cycle"}`},
		{"deploy", deploy, `{"nodeId":"` + node + `","profile":"cycle","profileVersion":1}`},
	} {
		if code, out := e.call(e.acme, c.procedure, c.body); kindOf(out) != "NOT_FOUND" {
			t.Errorf("%s root's private profile as acme = %d %v, want NOT_FOUND", c.name, code, out)
		}
	}

	// Render: where each step runs, its inputs after defaults, its timeout.
	r := e.ok(e.root, profRender, `{"id":"cycle","profileVersion":1}`)
	st, _ := r["steps"].([]any)
	if len(st) != 2 {
		t.Fatalf("profiles.render = %v, want 2 steps", r)
	}
	second := st[1].(map[string]any)
	with, _ := second["with"].(map[string]any)
	if second["use"] != "management.setBootDevice" || second["runsOn"] != "site" || second["retrySafe"] != true ||
		second["timeoutSeconds"] != "120" || with["device"] != "pxe" || with["persistent"] != false {
		t.Errorf("profiles.render step 1 = %v, want setBootDevice on site, retrySafe, 120s, with device pxe and the default persistent false", second)
	}
	// A plugin's step the control plane's worker published feeds media.insert.
	iso := sdk.Step{ID: "acme.iso", RunsOn: sdk.ControlPlane, Timeout: 5 * time.Minute, Outputs: []string{"url"}}
	if err := s.PublishSteps(ctx, "", "acme", []sdk.Step{iso}); err != nil {
		t.Fatal(err)
	}
	e.ok(e.root, profCreate, `{"profile":{"id":"iso","version":1,"target":"metal","role":"host","steps":[{"use":"acme.iso"},`+
		`{"use":"media.insert","with":{"fromStep":"acme.iso"}}]}}`)
	r = e.ok(e.root, profRender, `{"id":"iso","profileVersion":1}`)
	st, _ = r["steps"].([]any)
	if len(st) != 2 || st[0].(map[string]any)["runsOn"] != "control-plane" || st[0].(map[string]any)["retrySafe"] != nil ||
		st[0].(map[string]any)["timeoutSeconds"] != "300" || st[1].(map[string]any)["fromStep"] != "acme.iso" ||
		fmt.Sprint(st[1].(map[string]any)["fromFields"]) != "[url]" {
		t.Errorf("profiles.render iso = %v, want acme.iso on the control plane, 300s, not retrySafe, then media.insert reading url from it", r)
	}
	if code, out := e.call(e.root, profRender, `{"id":"cycle"}`); kindOf(out) != "INVALID_INPUT" || field(out) != "profileVersion" {
		t.Errorf("profiles.render without a version = %d %v, want INVALID_INPUT profileVersion", code, out)
	}

	if code, out := e.call(e.root, profUpdate, `{"id":"cycle","visibility":"everyone"}`); kindOf(out) != "INVALID_INPUT" || field(out) != "visibility" {
		t.Errorf("profiles.update visibility everyone = %d %v, want INVALID_INPUT visibility", code, out)
	}
	u := e.ok(e.root, profUpdate, `{"id":"cycle","profileVersion":1,"visibility":"public"}`)
	if items, _ := u["items"].([]any); len(items) != 1 || items[0].(map[string]any)["visibility"] != "public" {
		t.Errorf("profiles.update v1 public = %v, want v1 public", u)
	}

	got := e.ok(e.acme, profGet, `{"id":"cycle","version":1}`)
	if nested(got, "profile", "tenantId") != api.RootTenant {
		t.Errorf("profiles.get root's public profile as acme = %v, want it, of tenant root", got)
	}
	e.ok(e.acme, profRender, `{"id":"cycle","profileVersion":1}`)
	if l := e.ok(e.acme, profList, `{}`); len(l["items"].([]any)) != 1 {
		t.Errorf("profiles.list as acme = %v, want root's public v1 only", l)
	}
	if code, out := e.call(e.acme, profGet, `{"id":"cycle","version":2}`); kindOf(out) != "NOT_FOUND" {
		t.Errorf("profiles.get root's private v2 as acme = %d %v, want NOT_FOUND", code, out)
	}
	for _, c := range []struct{ name, procedure, body string }{
		{"update", profUpdate, `{"id":"cycle","profileVersion":1,"visibility":"private"}`},
		{"delete", profDelete, `{"id":"cycle","profileVersion":1}`},
	} {
		if code, out := e.call(e.acme, c.procedure, c.body); kindOf(out) != "PERMISSION_DENIED" {
			t.Errorf("%s root's public profile as acme = %d %v, want PERMISSION_DENIED", c.name, code, out)
		}
	}
	// acme deploys root's public profile on its node.
	makeReady(t, s, node)
	if code, out := e.call(e.acme, deploy, `{"nodeId":"`+node+`","profile":"cycle","profileVersion":2}`); kindOf(out) != "NOT_FOUND" {
		t.Errorf("metal.deploy with root's private v2 as acme = %d %v, want NOT_FOUND", code, out)
	}
	if len(started) != 0 {
		t.Errorf("metal.deploy refused started %v, want nothing", started)
	}
	e.ok(e.acme, deploy, `{"nodeId":"`+node+`","profile":"cycle","profileVersion":1}`)
	if len(started) != 1 || !strings.Contains(started[0], "metal.deploy") || !strings.Contains(started[0], "ProfileID:cycle ProfileVersion:1") {
		t.Errorf("metal.deploy with root's public profile as acme started %v, want one metal.deploy of cycle v1", started)
	}

	// Delete: refused while a workflow runs the profile, by anyone.
	tc.list = []*workflowpb.WorkflowExecutionInfo{deployRun(t, "acme", node, "cycle")}
	code, out := e.call(e.root, profDelete, `{"id":"cycle","profileVersion":1}`)
	if msg := fmt.Sprint(out["message"]); kindOf(out) != "INVALID_STATE" || !strings.Contains(msg, "1 of other tenants") || strings.Contains(msg, node) {
		t.Errorf("profiles.delete v1 while acme deploys it = %d %v, want INVALID_STATE counting acme's workflow, not naming it", code, out)
	}
	if !strings.Contains(query, "ProfileId = 'cycle'") || !strings.Contains(query, "ProfileVersion = 1") {
		t.Errorf("profiles.delete queried Temporal with %q, want the profile's id and version", query)
	}
	tc.list = []*workflowpb.WorkflowExecutionInfo{deployRun(t, api.RootTenant, "node_root", "cycle")}
	if code, out := e.call(e.root, profDelete, `{"id":"cycle"}`); kindOf(out) != "INVALID_STATE" || !strings.Contains(fmt.Sprint(out["message"]), "node_root") {
		t.Errorf("profiles.delete while root deploys it = %d %v, want INVALID_STATE naming node_root", code, out)
	}
	e.ok(e.acme, profGet, `{"id":"cycle","version":1}`)
	tc.list = nil
	if d := e.ok(e.root, profDelete, `{"id":"cycle","profileVersion":1}`); fmt.Sprint(d["versions"]) != "[1]" {
		t.Errorf("profiles.delete v1 = %v, want versions [1]", d)
	}
	if code, out := e.call(e.acme, profGet, `{"id":"cycle","version":1}`); kindOf(out) != "NOT_FOUND" {
		t.Errorf("profiles.get deleted v1 as acme = %d %v, want NOT_FOUND", code, out)
	}
	if code, out := e.call(e.root, profDelete, `{"id":"cycle","profileVersion":1}`); kindOf(out) != "NOT_FOUND" {
		t.Errorf("profiles.delete v1 again = %d %v, want NOT_FOUND", code, out)
	}
	e.ok(e.root, profGet, `{"id":"cycle","version":2}`)
}

// twoTenants serves the API on a fresh database with tenants root and acme,
// each with a token, its Temporal client tc.
func twoTenants(t *testing.T, tc client.Client) *env {
	s := testpg.New(t)
	if err := s.EnsureTenant(t.Context(), api.RootTenant); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTenant(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Store: s, Temporal: tc}).Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, store: s, root: token(t, s, api.RootTenant), acme: token(t, s, "acme")}
}

// makeReady takes acmeNode's node from enrolling to ready, its commissioning
// wipe excused as its pool allows.
func makeReady(t *testing.T, s *store.Store, node string) {
	ctx := t.Context()
	if err := s.Transition(ctx, "acme", node, nodestate.Enrolling, nodestate.Inspecting, store.TransitionInfo{}); err != nil {
		t.Fatal(err)
	}
	ready := store.TransitionInfo{Run: store.Run{WorkflowID: "metal-" + node, RunID: "r0"}, Exception: store.WipeAllowUnverifiedRelease}
	if err := s.Transition(ctx, "acme", node, nodestate.Inspecting, nodestate.Ready, ready); err != nil {
		t.Fatal(err)
	}
}

// acmeNode is a node of tenant acme, still enrolling, in a pool that may
// skip the wipe (so a test moves it to ready).
func acmeNode(t *testing.T, s *store.Store) string {
	ctx := t.Context()
	site, _, err := s.CreateSite(ctx, store.Site{TenantID: "acme", Kind: "shared", Region: "lab-1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePool(ctx, store.Pool{TenantID: "acme", SiteID: site.ID, Class: "metal-host", Agent: "bcd",
		Policy: store.PoolPolicy{AllowUnverifiedRelease: true}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "acme", SiteID: site.ID, PoolID: p.ID,
		BMCAddress: "https://bmc-acme.test/redfish/v1/Systems/1", BMCDriver: "redfish", BMCCredentialsRef: "env://BMC"})
	if err != nil {
		t.Fatal(err)
	}
	return n.ID
}

// TestDeleteRefusedWhileAnotherTenantRunsIt: a profile made private again
// while another tenant's deploy of it runs is still in use: delete is
// refused; a workflow of a tenant with its own profile of that id runs its
// own and does not count.
func TestDeleteRefusedWhileAnotherTenantRunsIt(t *testing.T) {
	t.Parallel()
	s := testpg.New(t)
	ctx := context.Background()
	if err := s.EnsureTenant(ctx, api.RootTenant); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "other"} {
		if err := s.CreateTenant(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	var query string
	tc := &running{query: &query, started: new([]string)}
	srv := httptest.NewServer(api.New(api.Config{Store: s, Temporal: tc}).Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, url: srv.URL, store: s, root: token(t, s, api.RootTenant), acme: token(t, s, "acme")}
	cycle := `{"profile":{"id":"cycle","version":1,"target":"metal","role":"host","visibility":"%s","steps":[{"use":"power.setPower","with":{"action":"cycle"}}]}}`
	e.ok(e.root, profCreate, fmt.Sprintf(cycle, "public"))
	e.ok(token(t, s, "other"), profCreate, fmt.Sprintf(cycle, "private"))
	e.ok(e.root, profUpdate, `{"id":"cycle","visibility":"private"}`) // acme's deploy of it still runs
	tc.list = []*workflowpb.WorkflowExecutionInfo{deployRun(t, "acme", "node_acme", "cycle")}
	if code, out := e.call(e.root, profDelete, `{"id":"cycle"}`); kindOf(out) != "INVALID_STATE" || !strings.Contains(fmt.Sprint(out["message"]), "1 of other tenants") {
		t.Errorf("profiles.delete while acme runs it, now private = %d %v, want INVALID_STATE counting acme's workflow", code, out)
	}
	tc.list = []*workflowpb.WorkflowExecutionInfo{deployRun(t, "other", "node_other", "cycle")}
	if d := e.ok(e.root, profDelete, `{"id":"cycle"}`); fmt.Sprint(d["versions"]) != "[1]" {
		t.Errorf("profiles.delete while other runs its own cycle = %v, want versions [1]", d)
	}
}

// TestVerbClearsAnOldRefusal: the error a refused verb left on a ready
// node is cleared when the next verb starts, and kept when the next verb
// is itself refused for the node's state (nothing started). Before, the
// refused verb cleared it too.
func TestVerbClearsAnOldRefusal(t *testing.T) {
	t.Parallel()
	tc := &running{query: new(string), started: new([]string)}
	e := twoTenants(t, tc)
	e.ok(e.acme, profCreate, `{"profile":{"id":"cycle","version":1,"target":"metal","role":"host","steps":[{"use":"power.setPower","with":{"action":"cycle"}}]}}`)
	node := acmeNode(t, e.store)
	makeReady(t, e.store, node)
	const old = "deploy failed and left the node ready: cache.ensureImage: INVALID_INPUT: …"
	if err := e.store.RecordRefusal(t.Context(), "acme", node, nodestate.Ready, old); err != nil {
		t.Fatal(err)
	}
	lastError := func() string {
		n, err := e.store.GetNode(t.Context(), "acme", node)
		if err != nil {
			t.Fatal(err)
		}
		return n.LastError
	}
	if _, out := e.call(e.acme, "/bettercompute.v1.MetalService/Undeploy", `{"nodeId":"`+node+`","wipe":"quick"}`); kindOf(out) != "INVALID_STATE" {
		t.Fatalf("undeploy of a ready node = %s, want INVALID_STATE", out)
	}
	if got := lastError(); got != old {
		t.Errorf("after a refused undeploy the node's error is %q, want the earlier refusal kept", got)
	}
	e.ok(e.acme, deploy, `{"nodeId":"`+node+`","profile":"cycle","profileVersion":1}`)
	if got := lastError(); got != "" {
		t.Errorf("after a deploy started the node's error is %q, want it cleared", got)
	}
}
