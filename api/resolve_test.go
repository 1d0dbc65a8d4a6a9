package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/api"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/store"
)

const metalDeployPath = "/bettercompute.v1.MetalService/Deploy"

// Plugin steps the API is not built with: a control-plane step that
// renders an ISO (outputs url), one that outputs only a serial, and a site
// step that mounts a url, read from an earlier step with fromStep.
var (
	acmeRender = sdk.Step{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute, Outputs: []string{"url"}}
	acmeProbe  = sdk.Step{ID: "acme.probe", RunsOn: sdk.ControlPlane, Timeout: time.Minute, Outputs: []string{"serial"}}
	acmeMount  = sdk.Step{ID: "acme.mount", RunsOn: sdk.Site, Timeout: time.Minute, Needs: []sdk.Need{sdk.NeedsVirtualMedia},
		Input: sdk.Manifest{{Name: "url", Type: sdk.String, Required: true, FromStep: true}}}
)

// announceSteps announces, as site's agent, the built-in site and ramdisk
// steps but those left out, and extra.
func (a *agentsEnv) announceSteps(t *testing.T, site string, leaveOut []string, extra ...sdk.Step) error {
	t.Helper()
	var list []*structpb.Struct
	for _, s := range append(steps.Builtins().Steps, extra...) {
		if s.RunsOn == sdk.ControlPlane || slices.Contains(leaveOut, s.ID) {
			continue
		}
		list = append(list, descriptor(t, s))
	}
	return a.announce(t, site, list)
}

func (a *agentsEnv) announce(t *testing.T, site string, list []*structpb.Struct) error {
	t.Helper()
	key, _, _ := pki.NewEd25519Key()
	pem, err := a.ca.Issue(key.Public(), pki.RoleSite, site, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	jc := bettercomputev1connect.NewJoinServiceClient(a.client(t, pem, key), a.url)
	_, err = jc.Announce(context.Background(), connect.NewRequest(&v1.AnnounceRequest{BmcDrivers: []string{"ipmi", "redfish"}, Steps: list}))
	return err
}

func descriptor(t *testing.T, s sdk.Step) *structpb.Struct {
	t.Helper()
	b, err := json.Marshal(s.Describe())
	if err != nil {
		t.Fatal(err)
	}
	d := &structpb.Struct{}
	if err := d.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return d
}

// storeProfile stores a profile as one stored before it was resolved, for
// validate and deploy to find what is wrong with it.
func storeProfile(t *testing.T, s *store.Store, id string, st ...provision.Step) {
	t.Helper()
	doc, _ := json.Marshal(provision.Profile{ID: id, Version: 1, Target: "metal", Role: "host", Steps: st, Visibility: "private"})
	if err := s.CreateProfile(context.Background(), store.Profile{TenantID: "root", ID: id, Version: 1, Document: doc, Visibility: "private"}); err != nil {
		t.Fatal(err)
	}
}

// TestAnnounceStoresSteps: a site agent's announce stores the steps it
// serves, replacing what it announced before; a control-plane step or a
// descriptor that would not register is refused naming it, nothing changed.
func TestAnnounceStoresSteps(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	announced := func() []string {
		rows, err := a.store.PublishedSteps(ctx, []string{"root"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.SiteID+"/"+r.StepID)
		}
		return out
	}
	if err := a.announceSteps(t, a.site, nil, acmeMount); err != nil {
		t.Fatalf("Announce = %v", err)
	}
	if got := announced(); !slices.Contains(got, a.site+"/acme.mount") || !slices.Contains(got, a.site+"/power.setPower") {
		t.Errorf("published steps = %v, want acme.mount and power.setPower of %s", got, a.site)
	}
	if err := a.announceSteps(t, a.site, []string{"media.insert"}); err != nil {
		t.Fatalf("Announce again = %v", err)
	}
	want := announced()
	if slices.Contains(want, a.site+"/acme.mount") || slices.Contains(want, a.site+"/media.insert") {
		t.Errorf("published steps after a second announce = %v, want acme.mount and media.insert gone", want)
	}
	for _, tc := range []struct {
		list  []*structpb.Struct
		field string
	}{
		{[]*structpb.Struct{descriptor(t, acmeRender)}, "steps[0].runsOn"},
		{[]*structpb.Struct{descriptor(t, acmeMount), descriptor(t, acmeMount)}, "steps[1].id"},
		{[]*structpb.Struct{{Fields: map[string]*structpb.Value{"id": structpb.NewStringValue("acme.x"), "runsOn": structpb.NewStringValue("site")}}}, "steps[0]"},
	} {
		if err := a.announce(t, a.site, tc.list); kind(err) != "INVALID_INPUT" || errorField(err) != tc.field {
			t.Errorf("Announce(%v) = %v (field %q), want INVALID_INPUT naming %s", tc.list, err, errorField(err), tc.field)
		}
	}
	if got := announced(); !slices.Equal(got, want) {
		t.Errorf("published steps after refused announces = %v, want %v", got, want)
	}
}

// TestProfilesResolveAgainstPublishedSteps: a plugin step is unknown until
// a worker publishes it, then create takes it; validate lists every
// problem: a fromStep to a later step, a fromStep whose step does not
// output the field, a bad input, an unknown step, a step no site serves,
// one of the lifecycle's own commands.
func TestProfilesResolveAgainstPublishedSteps(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	mount := `{"profile":{"id":"mount","version":1,"target":"metal","role":"host","steps":[{"use":"acme.render"},{"use":"acme.mount","with":{"fromStep":"acme.render"}}]}}`
	if code, out := a.call(a.root, profCreate, mount); kindOf(out) != "INVALID_INPUT" || field(out) != "profile.steps[0].use" {
		t.Errorf("profiles.create(plugin steps nobody publishes) = %d %v, want INVALID_INPUT naming profile.steps[0].use", code, out)
	}
	if err := a.store.PublishSteps(ctx, "", "acme", []sdk.Step{acmeRender, acmeProbe}); err != nil {
		t.Fatal(err)
	}
	if err := a.announceSteps(t, a.site, []string{"media.insert"}, acmeMount); err != nil {
		t.Fatalf("Announce = %v", err)
	}
	a.ok(a.root, profCreate, mount)
	storeProfile(t, a.store, "bad",
		provision.Step{Use: "acme.mount", With: map[string]any{"fromStep": "acme.render"}},
		provision.Step{Use: "acme.render"},
		provision.Step{Use: "acme.probe"},
		provision.Step{Use: "acme.mount", With: map[string]any{"fromStep": "acme.probe"}},
		provision.Step{Use: "media.insert", With: map[string]any{"url": "http://cache.example/a.iso"}},
		provision.Step{Use: "power.setPower", With: map[string]any{"action": "explode"}},
		provision.Step{Use: "ansible.run"},
		provision.Step{Use: "disk.wipe", With: map[string]any{"mode": "quick"}})
	v := a.ok(a.root, profValidate, `{"id":"bad","profileVersion":1}`)
	got := map[string]string{}
	for _, p := range v["problems"].([]any) {
		m := p.(map[string]any)
		got[m["field"].(string)] = m["message"].(string)
	}
	for f, want := range map[string]string{
		"steps[0].with.fromStep": `fromStep "acme.render" must name a step earlier in the profile`,
		"steps[3].with.fromStep": "acme.mount reads url from acme.probe, whose outputs are serial",
		"steps[4].use":           "no site agent serves media.insert",
		"steps[5].with.action":   "explode",
		"steps[6].use":           `unknown step "ansible.run"`,
		"steps[7].use":           "disk.wipe is one of the lifecycle's own commands",
	} {
		if !strings.Contains(got[f], want) {
			t.Errorf("validate problem %s = %q, want it to say %q (all: %v)", f, got[f], want, got)
		}
	}
	if v["valid"] == true || len(got) != 6 {
		t.Errorf("validate = %v, want exactly the 6 problems", v)
	}
}

// starts is a Temporal client that counts the workflows started (and
// starts none); no node has a running workflow.
type starts struct {
	client.Client
	n *atomic.Int32
}

func (starts) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewNotFound("no workflow")
}

func (s starts) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	s.n.Add(1)
	return nil, errors.New("test: workflows are counted, not run")
}

// TestDeployRefusesWhatTheNodeCannotRun: deploy resolves the profile
// against the node before its workflow starts - virtual media on an IPMI
// node, the ramdisk on a pool with agent none, a step its site's agent did
// not announce, an unknown step, a bad input, a fromStep to a later step -
// each INVALID_INPUT naming profile.steps[i]…, no workflow started and
// the node unchanged; the same profile on a node that can run it starts.
func TestDeployRefusesWhatTheNodeCannotRun(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	var started atomic.Int32
	srv := httptest.NewServer(api.New(api.Config{Store: a.store, Temporal: starts{n: &started}}).Handler())
	t.Cleanup(srv.Close)
	other, _, _ := a.store.CreateSite(ctx, store.Site{TenantID: "root", Kind: "shared", Region: "r2"})
	if err := a.announceSteps(t, a.site, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.announceSteps(t, other.ID, nil, acmeMount); err != nil { // acme.mount runs on the other site only
		t.Fatal(err)
	}
	if err := a.store.PublishSteps(ctx, "", "acme", []sdk.Step{acmeRender}); err != nil {
		t.Fatal(err)
	}
	poolBcd, _ := a.store.CreatePool(ctx, store.Pool{TenantID: "root", SiteID: a.site, Class: "c", Agent: "bcd"})
	poolNone, _ := a.store.CreatePool(ctx, store.Pool{TenantID: "root", SiteID: a.site, Class: "n", Agent: "none"})
	node := func(pool store.Pool, driver, address string) string {
		n, err := a.store.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "root", SiteID: a.site, PoolID: pool.ID,
			BMCAddress: address, BMCDriver: driver, BMCCredentialsRef: "env://BCD_SECRET_BMC"})
		if err != nil {
			t.Fatal(err)
		}
		wipe := "wipe_" + n.ID
		if _, err := a.store.Pool().Exec(ctx, `INSERT INTO wipe_records (id, tenant_id, node_id, workflow_id, run_id, kind) VALUES ($1, 'root', $2, 'wf', 'run', 'attested')`, wipe, n.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.Pool().Exec(ctx, `UPDATE metal_nodes SET state = 'ready', ready_by = $2 WHERE id = $1`, n.ID, wipe); err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	ipmi, redfish, none := node(poolBcd, "ipmi", "10.0.0.1"), node(poolBcd, "redfish", "10.0.0.2"), node(poolNone, "redfish", "10.0.0.3")
	img := nested(a.ok(a.root, imagesReg, `{"name":"u","source":"http://cache/u.raw.zst","digest":"sha256:`+strings.Repeat("ab", 32)+`","format":"raw","compression":"zstd","size":1048576}`), "image", "id")
	storeProfile(t, a.store, "media", provision.Step{Use: "media.insert", With: map[string]any{"url": "http://cache.example/a.iso"}}, provision.Step{Use: "media.eject"})
	storeProfile(t, a.store, "image", provision.Step{Use: "deploy.image", With: map[string]any{"image": img}}, provision.Step{Use: "boot.kexec"})
	storeProfile(t, a.store, "mount", provision.Step{Use: "power.setPower", With: map[string]any{"action": "off"}},
		provision.Step{Use: "acme.render"}, provision.Step{Use: "acme.mount", With: map[string]any{"fromStep": "acme.render"}})
	storeProfile(t, a.store, "unknown", provision.Step{Use: "ansible.run"})
	storeProfile(t, a.store, "badinput", provision.Step{Use: "power.setPower", With: map[string]any{"action": "explode"}})
	storeProfile(t, a.store, "later", provision.Step{Use: "acme.mount", With: map[string]any{"fromStep": "acme.render"}}, provision.Step{Use: "acme.render"})
	deploy := func(node, profile string) (int, map[string]any) {
		body := fmt.Sprintf(`{"nodeId":%q,"profile":%q,"profileVersion":1}`, node, profile)
		e := *a.env
		e.url = srv.URL
		return e.call(a.root, metalDeployPath, body)
	}
	for _, tc := range []struct{ node, profile, field, message string }{
		{ipmi, "media", "profile.steps[0].use", "media.insert needs virtual media, which the node's ipmi BMC does not have"},
		{none, "image", "profile.steps[0].use", "deploy.image needs the ramdisk, and the node's pool runs no agent (agent: none)"},
		{redfish, "mount", "profile.steps[2].use", "no agent of site " + a.site + " serves acme.mount"},
		{redfish, "unknown", "profile.steps[0].use", `unknown step "ansible.run"`},
		{redfish, "badinput", "profile.steps[0].with.action", "explode"},
		{redfish, "later", "profile.steps[0].with.fromStep", "must name a step earlier in the profile"},
	} {
		before := rowCounts(t, a.store)
		n0, _ := a.store.GetNode(ctx, "root", tc.node)
		code, out := deploy(tc.node, tc.profile)
		msg, _ := out["message"].(string)
		if kindOf(out) != "INVALID_INPUT" || field(out) != tc.field || !strings.Contains(msg, tc.message) {
			t.Errorf("deploy %s on %s = %d %s %q %q, want INVALID_INPUT naming %s saying %q", tc.profile, tc.node, code, kindOf(out), field(out), msg, tc.field, tc.message)
		}
		n1, _ := a.store.GetNode(ctx, "root", tc.node)
		if n1.State != n0.State || !n1.UpdatedAt.Equal(n0.UpdatedAt) || n1.ProfileID != n0.ProfileID {
			t.Errorf("node after the refused deploy %s = %s %s, want %s unchanged", tc.profile, n1.State, n1.UpdatedAt, n0.State)
		}
		if after := rowCounts(t, a.store); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("rows after the refused deploy %s = %v, want %v", tc.profile, after, before)
		}
	}
	if n := started.Load(); n != 0 {
		t.Errorf("workflows started by refused deploys = %d, want 0", n)
	}
	deploy(redfish, "media") // the same profile on a node with virtual media
	if n := started.Load(); n != 1 {
		t.Errorf("workflows started by deploy media on a Redfish node = %d, want 1", n)
	}
}

// errorField is the field an API error names.
func errorField(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		if x, e := d.Value(); e == nil {
			if x, ok := x.(*v1.ErrorDetail); ok {
				return x.Field
			}
		}
	}
	return ""
}

// TestPublishControlPlaneSteps: a control-plane worker publishes its
// registry's control-plane steps only, replacing what a worker with the same
// plugins published before; a worker with other plugins keeps its own.
func TestPublishControlPlaneSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	reg, err := steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{acmeRender, acmeMount}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.PublishSteps(ctx, "", "better-compute,acme", []sdk.Step{acmeProbe}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.PublishSteps(ctx, "", "better-compute,other", []sdk.Step{acmeRender}); err != nil {
		t.Fatal(err)
	}
	if err := api.PublishControlPlaneSteps(ctx, e.store, reg); err != nil {
		t.Fatalf("PublishControlPlaneSteps = %v", err)
	}
	rows, err := e.store.PublishedSteps(ctx, []string{"root"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.SiteID+"/"+r.Worker+"/"+r.StepID)
	}
	var want []string
	for _, s := range reg.Steps() {
		if s.RunsOn == sdk.ControlPlane {
			want = append(want, "/better-compute,acme/"+s.ID)
		}
	}
	want = append(want, "/better-compute,other/acme.render")
	if !slices.Equal(got, want) || !slices.Contains(got, "/better-compute,acme/acme.render") {
		t.Errorf("published steps = %v, want the control-plane steps %v", got, want)
	}
}

// TestPublicProfileResolvesAgainstTheCallersSites: validate and render of
// another tenant's public profile resolve its steps against the caller's
// sites, as its deploy does, not the owner's: acme's site serves
// acme.mount, root's does not (nor knows it), so root is told before it
// deploys.
func TestPublicProfileResolvesAgainstTheCallersSites(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	acmeSite, _, err := a.store.CreateSite(ctx, store.Site{TenantID: "acme", Kind: "shared", Region: "r", LoopbackLab: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.PublishSteps(ctx, "", "acme", []sdk.Step{acmeRender}); err != nil {
		t.Fatal(err)
	}
	if err := a.announceSteps(t, acmeSite.ID, nil, acmeMount); err != nil {
		t.Fatalf("Announce(acme's site) = %v", err)
	}
	if err := a.announceSteps(t, a.site, nil); err != nil {
		t.Fatalf("Announce(root's site) = %v", err)
	}
	a.ok(a.acme, profCreate, `{"profile":{"id":"mount","version":1,"target":"metal","role":"host","visibility":"public",`+
		`"steps":[{"use":"acme.render"},{"use":"acme.mount","with":{"fromStep":"acme.render"}}]}}`)
	if v := a.ok(a.acme, profValidate, `{"id":"mount","profileVersion":1}`); v["valid"] != true {
		t.Errorf("acme validates its own profile = %v, want valid", v)
	}
	v := a.ok(a.root, profValidate, `{"id":"mount","profileVersion":1}`)
	probs, _ := v["problems"].([]any)
	if v["valid"] == true || len(probs) != 1 || !strings.Contains(fmt.Sprint(probs[0]), "field:steps[1].use") ||
		!strings.Contains(fmt.Sprint(probs[0]), `"acme.mount"`) {
		t.Errorf("root validates acme's public profile = %v, want the one problem: steps[1].use, acme.mount, which no site of root's serves", v)
	}
	if code, out := a.call(a.root, profRender, `{"id":"mount","profileVersion":1}`); kindOf(out) != "INVALID_INPUT" || field(out) != "profile.steps[1].use" {
		t.Errorf("root renders acme's public profile = %d %v, want INVALID_INPUT naming profile.steps[1].use", code, out)
	}
}

// TestProfilesResolveAgainstTheTenantsOwnSites: a tenant's nodes run only
// at its own sites, so a step only another tenant's site (here the
// operator's) announced is unknown to it: acme's create is refused.
func TestProfilesResolveAgainstTheTenantsOwnSites(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	if err := a.announceSteps(t, a.site, nil, acmeMount); err != nil {
		t.Fatalf("Announce(root's site) = %v", err)
	}
	mount := `{"profile":{"id":"mount","version":1,"target":"metal","role":"host","steps":[{"use":"acme.mount","with":{"url":"http://cache.example/a.iso"}}]}}`
	if code, out := a.call(a.acme, profCreate, mount); kindOf(out) != "INVALID_INPUT" || field(out) != "profile.steps[0].use" {
		t.Errorf("acme creates a profile using a step only root's site serves = %d %v, want INVALID_INPUT naming profile.steps[0].use", code, out)
	}
	a.ok(a.root, profCreate, mount)
}
