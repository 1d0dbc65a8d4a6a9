//go:build fakehw

package demo_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/ids"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestVerbs drives every metal verb through the real API of one running
// demo: what each refuses and from which state, what each does, abort, and
// what a retired node keeps of its identity.
func TestVerbs(t *testing.T) {
	d := start(t, 2)
	ctx := ctxFor(t, 3*time.Minute)
	ma, mb := d.Rack.Machines()[0], d.Rack.Machines()[1]
	a, err := d.Enroll(ctx, ma)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Enroll(ctx, mb)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct{ name, id string }{{ma.Name, a}, {mb.Name, b}} {
		if err := d.Wait(ctx, x.name, x.id, "ready", 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		// The node is ready a moment before its enroll workflow closes.
		if err := d.CP.Client().GetWorkflow(ctx, wf.WorkflowID(x.id), "").Get(ctx, nil); err != nil {
			t.Fatalf("enroll of %s = %v", x.name, err)
		}
	}
	t.Run("bad input", func(t *testing.T) { testBadInput(t, d, a) })
	t.Run("enroll bad input", func(t *testing.T) { testEnrollBadInput(t, d) })
	t.Run("another tenant", func(t *testing.T) { testAnotherTenant(t, d, a) })
	t.Run("refused when ready", func(t *testing.T) {
		refusedVerbs(t, d, a, "ready", "undeploy", "rescue", "unrescue", "provide", "recover")
	})
	t.Run("nodes", func(t *testing.T) {
		t.Run("lifecycle", func(t *testing.T) { t.Parallel(); testLifecycle(t, d, ma.Name, a) })
		t.Run("abort", func(t *testing.T) { t.Parallel(); testAbort(t, d, mb.Name, b) })
	})
}

// verb calls verb on node through the API with valid arguments.
func callVerb(ctx context.Context, d *demo.Demo, name, node string) (*v1.VerbResponse, error) {
	m, req := d.API.Metal, connect.NewRequest(&v1.NodeVerbRequest{NodeId: node})
	var r *connect.Response[v1.VerbResponse]
	var err error
	switch name {
	case "deploy":
		r, err = m.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: node, Profile: d.Profile, ProfileVersion: 1}))
	case "undeploy":
		r, err = m.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: node, Wipe: "quick"}))
	case "power":
		r, err = m.Power(ctx, connect.NewRequest(&v1.PowerRequest{NodeId: node, Action: "on"}))
	case "abort":
		r, err = m.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: node, Reason: "test"}))
	case "manage":
		r, err = m.Manage(ctx, req)
	case "inspect":
		r, err = m.Inspect(ctx, req)
	case "provide":
		r, err = m.Provide(ctx, req)
	case "rescue":
		r, err = m.Rescue(ctx, req)
	case "unrescue":
		r, err = m.Unrescue(ctx, req)
	case "recover":
		r, err = m.Recover(ctx, req)
	case "retire":
		r, err = m.Retire(ctx, req)
	default:
		return nil, errors.New("no verb " + name)
	}
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

// refused checks that each verb is INVALID_STATE on node, which stays in state.
func refusedVerbs(t *testing.T, d *demo.Demo, id, state string, verbs ...string) {
	t.Helper()
	for _, v := range verbs {
		if _, err := callVerb(context.Background(), d, v, id); code(err) != "INVALID_STATE" {
			t.Errorf("metal.%s on a %s node = %v (%s), want INVALID_STATE", v, state, err, code(err))
		}
	}
	if n := node(t, d, id); n.State != state {
		t.Errorf("node after refused verbs = %s, want %s", n.State, state)
	}
}

// do runs verb on node, waits until the node is in state want and the
// verb's workflow has closed, and returns the workflow's error.
func doVerb(t *testing.T, d *demo.Demo, name, id, v, want string) error {
	t.Helper()
	r, err := callVerb(context.Background(), d, v, id)
	if err != nil {
		t.Fatalf("metal.%s = %v", v, err)
	}
	if err := d.Wait(context.Background(), name, id, want, time.Minute); err != nil {
		t.Fatalf("after metal.%s: %v", v, err)
	}
	return workflowDone(t, d, r)
}

// settle waits for the verb's workflow to close and returns its error.
func workflowDone(t *testing.T, d *demo.Demo, r *v1.VerbResponse) error {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	return d.CP.Client().GetWorkflow(ctx, r.WorkflowId, r.RunId).Get(ctx, nil)
}

// waitFor polls the node until it is in state.
func awaitState(t *testing.T, d *demo.Demo, id, state string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if node(t, d, id).State == state {
			return
		}
	}
	t.Fatalf("node %s never reached %s", id, state)
}

// field returns the field an INVALID_INPUT error names.
func errField(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, det := range ce.Details() {
		if v, e := det.Value(); e == nil {
			if x, ok := v.(*v1.ErrorDetail); ok {
				return x.Field
			}
		}
	}
	return ""
}

func testBadInput(t *testing.T, d *demo.Demo, a string) {
	ctx := context.Background()
	m := d.API.Metal
	cases := []struct {
		name, kind, field string
		call              func() error
	}{
		{"unknown node", "NOT_FOUND", "", func() error {
			_, err := m.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: ids.New(ids.Node)}))
			return err
		}},
		{"verb on an unknown node", "NOT_FOUND", "", func() error {
			_, err := m.Manage(ctx, connect.NewRequest(&v1.NodeVerbRequest{NodeId: ids.New(ids.Node)}))
			return err
		}},
		{"bad wipe mode", "INVALID_INPUT", "wipe", func() error {
			_, err := m.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: a, Wipe: "shred"}))
			return err
		}},
		{"bad power action", "INVALID_INPUT", "action", func() error {
			_, err := m.Power(ctx, connect.NewRequest(&v1.PowerRequest{NodeId: a, Action: "explode"}))
			return err
		}},
		{"unknown profile", "NOT_FOUND", "", func() error {
			_, err := m.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: a, Profile: "no-such-os", ProfileVersion: 1}))
			return err
		}},
		{"unknown profile version", "NOT_FOUND", "", func() error {
			_, err := m.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: a, Profile: d.Profile, ProfileVersion: 9}))
			return err
		}},
		{"abort without a reason", "INVALID_INPUT", "reason", func() error {
			_, err := m.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: a}))
			return err
		}},
		{"abort with no workflow running", "INVALID_STATE", "", func() error {
			_, err := m.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: a, Reason: "nothing runs"}))
			return err
		}},
	}
	for _, tc := range cases {
		err := tc.call()
		if code(err) != tc.kind || errField(err) != tc.field {
			t.Errorf("%s = %v (%s, field %q), want %s naming field %q", tc.name, err, code(err), errField(err), tc.kind, tc.field)
		}
	}
	if n := node(t, d, a); n.State != "ready" {
		t.Errorf("node after bad input = %s, want ready", n.State)
	}
}

func testEnrollBadInput(t *testing.T, d *demo.Demo) {
	ctx := context.Background()
	site, err := d.API.Sites.Create(ctx, connect.NewRequest(&v1.CreateSiteRequest{Kind: "shared", Region: "demo-2"}))
	if err != nil {
		t.Fatal(err)
	}
	mi := d.Rack.Machines()[0]
	good := func() *v1.EnrollRequest {
		return &v1.EnrollRequest{SiteId: d.SiteID, PoolId: d.PoolID, Bmc: &v1.Bmc{Address: mi.BMCAddress, Driver: mi.BMCDriver,
			Credentials: &v1.BmcCredentials{Username: "admin", Password: "pw"}}}
	}
	cases := []struct {
		name, field string
		edit        func(r *v1.EnrollRequest)
	}{
		{"bad BMC address", "bmc.address", func(r *v1.EnrollRequest) { r.Bmc.Address = "https://bmc .example/redfish" }},
		{"credentials in the URL", "bmc.address", func(r *v1.EnrollRequest) { r.Bmc.Address = "https://admin:pw@10.0.0.9/redfish/v1" }},
		{"credentials and credentialsRef", "bmc.credentials", func(r *v1.EnrollRequest) { r.Bmc.CredentialsRef = "env://BMC" }},
		{"no credentials", "bmc.credentials", func(r *v1.EnrollRequest) { r.Bmc.Credentials = nil }},
		{"bad credentialsRef", "bmc.credentialsRef", func(r *v1.EnrollRequest) { r.Bmc.Credentials, r.Bmc.CredentialsRef = nil, "file:///etc/shadow" }},
		{"bad MAC", "macs[1]", func(r *v1.EnrollRequest) { r.Macs = []string{"52:54:00:00:00:01", "52:54:zz:00:00:02"} }},
		{"pool of another site", "poolId", func(r *v1.EnrollRequest) { r.SiteId = site.Msg.Site.Id }},
		{"unknown driver", "bmc.driver", func(r *v1.EnrollRequest) { r.Bmc.Driver = "ssh" }},
		{"bad product UUID", "productUuid", func(r *v1.EnrollRequest) { r.ProductUuid = "not-a-uuid" }},
	}
	before := len(listNodes(t, d.API.Metal))
	for _, tc := range cases {
		req := good()
		tc.edit(req)
		_, err := d.API.Metal.Enroll(ctx, connect.NewRequest(req))
		if code(err) != "INVALID_INPUT" || errField(err) != tc.field {
			t.Errorf("metal.enroll with %s = %v (%s, field %q), want INVALID_INPUT naming %q", tc.name, err, code(err), errField(err), tc.field)
		}
	}
	if after := len(listNodes(t, d.API.Metal)); after != before {
		t.Errorf("metal.list after refused enrollments = %d nodes, want %d", after, before)
	}
}

func listNodes(t *testing.T, m bettercomputev1connect.MetalServiceClient) []*v1.Node {
	t.Helper()
	r, err := m.List(context.Background(), connect.NewRequest(&v1.ListNodesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg.Items
}

// bearer returns an HTTP client sending token.
func bearerAuth(token string) connect.ClientOption {
	return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}))
}

func testAnotherTenant(t *testing.T, d *demo.Demo, a string) {
	ctx := context.Background()
	root, err := os.ReadFile(d.CP.RootTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	tenants := bettercomputev1connect.NewTenantsServiceClient(http.DefaultClient, d.CP.APIURL(), connect.WithProtoJSON(),
		bearerAuth(strings.TrimSpace(string(root))))
	r, err := tenants.Create(ctx, connect.NewRequest(&v1.CreateTenantRequest{Id: "other-co"}))
	if err != nil {
		t.Fatalf("tenants.create = %v", err)
	}
	m := bettercomputev1connect.NewMetalServiceClient(http.DefaultClient, d.CP.APIURL(), connect.WithProtoJSON(), bearerAuth(r.Msg.Token))
	if _, err := m.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: a})); code(err) != "NOT_FOUND" {
		t.Errorf("metal.get of another tenant's node = %v (%s), want NOT_FOUND", err, code(err))
	}
	for _, call := range []func() error{
		func() error {
			_, err := m.Power(ctx, connect.NewRequest(&v1.PowerRequest{NodeId: a, Action: "off"}))
			return err
		},
		func() error { _, err := m.Retire(ctx, connect.NewRequest(&v1.NodeVerbRequest{NodeId: a})); return err },
		func() error {
			_, err := m.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: a, Reason: "mine now"}))
			return err
		},
	} {
		if err := call(); code(err) != "NOT_FOUND" {
			t.Errorf("a verb on another tenant's node = %v (%s), want NOT_FOUND", err, code(err))
		}
	}
	if n := listNodes(t, m); len(n) != 0 {
		t.Errorf("metal.list of a new tenant = %d nodes, want 0", len(n))
	}
	if n := node(t, d, a); n.State != "ready" {
		t.Errorf("node after another tenant's verbs = %s, want ready", n.State)
	}
}

func testLifecycle(t *testing.T, d *demo.Demo, name, id string) {
	ctx := context.Background()
	// A verb while another runs is refused, naming the running workflow.
	r, err := callVerb(ctx, d, "deploy", id)
	if err != nil {
		t.Fatal(err)
	}
	// So is a second deploy at once, while the node may still read ready.
	if _, err := callVerb(ctx, d, "deploy", id); code(err) != "INVALID_STATE" || !strings.Contains(err.Error(), r.RunId) {
		t.Errorf("a second metal.deploy at once = %v (%s), want INVALID_STATE naming run %s", err, code(err), r.RunId)
	}
	awaitState(t, d, id, "deploying")
	for _, v := range []string{"undeploy", "power", "retire"} {
		_, err := callVerb(ctx, d, v, id)
		if code(err) != "INVALID_STATE" || !strings.Contains(err.Error(), "metal.deploy") ||
			!strings.Contains(err.Error(), r.WorkflowId) || !strings.Contains(err.Error(), r.RunId) {
			t.Errorf("metal.%s during a deploy = %v (%s), want INVALID_STATE naming metal.deploy %s run %s", v, err, code(err), r.WorkflowId, r.RunId)
		}
	}
	if err := d.Wait(ctx, name, id, "deployed", time.Minute); err != nil {
		t.Fatal(err)
	}
	// A verb the moment the node rests, its deploy perhaps still closing,
	// is not refused: it waits for the deploy to close.
	pr, err := callVerb(ctx, d, "power", id)
	if err != nil {
		t.Fatalf("metal.power as the node became deployed = %v", err)
	}
	if err := workflowDone(t, d, r); err != nil {
		t.Fatalf("deploy workflow = %v", err)
	}
	if err := workflowDone(t, d, pr); err != nil {
		t.Fatalf("power workflow = %v", err)
	}
	refusedVerbs(t, d, id, "deployed", "deploy", "unrescue", "provide", "recover", "retire", "manage", "inspect", "abort")
	// A release that could only end failed is refused before anything moves.
	_, err = d.API.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: id, Wipe: "none"}))
	if n := node(t, d, id); code(err) != "UNVERIFIED_WIPE" || !strings.Contains(err.Error(), "allowUnverifiedRelease") || n.State != "deployed" {
		t.Errorf("metal.undeploy --wipe none on a pool without allowUnverifiedRelease = %v (%s), node %s; want UNVERIFIED_WIPE naming the policy, still deployed",
			err, code(err), n.State)
	}
	// power acts and leaves the state as it was.
	for _, action := range []string{"off", "on"} {
		pr, err := d.API.Metal.Power(ctx, connect.NewRequest(&v1.PowerRequest{NodeId: id, Action: action}))
		if err != nil {
			t.Fatalf("metal.power %s = %v", action, err)
		}
		if err := workflowDone(t, d, pr.Msg); err != nil {
			t.Errorf("metal.power %s workflow = %v", action, err)
		}
		st, _ := d.Rack.State(name)
		if n := node(t, d, id); st.Power != action || n.State != "deployed" {
			t.Errorf("after metal.power %s: machine power %s, node %s; want %s and deployed", action, st.Power, n.State, action)
		}
	}
	steps := []struct{ verb, state string }{{"rescue", "rescue"}, {"unrescue", "deployed"}, {"undeploy", "ready"},
		{"manage", "manageable"}, {"inspect", "manageable"}, {"provide", "ready"}, {"inspect", "ready"}}
	refusals := map[string][]string{
		"rescue":     {"deploy", "undeploy", "rescue", "provide", "retire"},
		"manageable": {"deploy", "undeploy", "rescue", "manage", "recover"},
	}
	for _, s := range steps {
		if err := doVerb(t, d, name, id, s.verb, s.state); err != nil {
			t.Fatalf("metal.%s workflow = %v", s.verb, err)
		}
		refusedVerbs(t, d, id, s.state, refusals[s.state]...)
		if st, _ := d.Rack.State(name); s.state == "rescue" && st.BootedInto != emulate.BootedRamdisk {
			t.Errorf("machine in rescue runs %q, want the ramdisk", st.BootedInto)
		}
	}
	checkWipes(t, d, id, 4) // enroll, undeploy, provide, inspect from ready
	t.Run("retire", func(t *testing.T) { testRetire(t, d, name, id) })
}

// checkWipes: the node reached ready want times, each by consuming the
// attested wipe of the workflow run that moved it, and no wipe is left
// unconsumed or consumed twice (the store's rule, seen from its records).
func checkWipes(t *testing.T, d *demo.Demo, id string, want int) {
	t.Helper()
	wipes, err := d.CP.Store().ListWipes(context.Background(), "root", id)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]bool{}
	for _, w := range wipes {
		if w.Kind != "attested" || w.UsedAt == nil || len(w.Disks) == 0 || runs[w.RunID] {
			t.Errorf("wipe record %+v: want an attested wipe of disks, consumed by a move into ready, one per run", w)
		}
		runs[w.RunID] = true
	}
	if len(wipes) != want {
		t.Errorf("wipe records of %s = %d, want %d (one per move into ready)", id, len(wipes), want)
	}
}

// testRetire retires a ready node: final, its identity revoked.
func testRetire(t *testing.T, d *demo.Demo, name, id string) {
	ctx := context.Background()
	r, err := callVerb(ctx, d, "retire", id)
	if err != nil {
		t.Fatalf("metal.retire = %v", err)
	}
	werr := workflowDone(t, d, r)
	if err := d.Wait(ctx, name, id, "retired", time.Minute); err != nil || werr != nil {
		t.Fatalf("metal.retire = workflow %v, node %v", werr, err)
	}
	refusedVerbs(t, d, id, "retired", "manage", "inspect", "provide", "deploy", "undeploy", "rescue", "unrescue",
		"recover", "retire", "power", "abort")
	st, _ := d.Rack.State(name)
	// A retired node's certificates are revoked, its tokens used.
	rows, err := d.CP.Store().Pool().Query(ctx, `SELECT serial FROM certificates WHERE identity = $1`, id)
	if err != nil {
		t.Fatal(err)
	}
	var serials []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		serials = append(serials, s)
	}
	// The emulated machines' first disk has no cryptographic erase: retire
	// secure-erased it and crypto-erased the other, and says so.
	if got := retireModes(t, d, id); got != "crypto-erase+secure-erase" {
		t.Errorf("retire wipe modes = %q, want crypto-erase+secure-erase", got)
	}
	if len(serials) != st.RamdiskBoots {
		t.Errorf("certificates of %s = %d, want one per ramdisk boot (%d)", id, len(serials), st.RamdiskBoots)
	}
	for _, s := range serials {
		if revoked, err := d.CP.Store().CertificateRevoked(ctx, s); err != nil || !revoked {
			t.Errorf("CertificateRevoked(%s) of a retired node = %v, %v; want true", s, revoked, err)
		}
	}
	for _, tok := range []string{st.Tokens[0], st.Tokens[len(st.Tokens)-1]} {
		if err := rejoin(d, tok); code(err) != "UNAUTHENTICATED" {
			t.Errorf("join with a used discovery token = %v (%s), want UNAUTHENTICATED", err, code(err))
		}
	}
}

func testAbort(t *testing.T, d *demo.Demo, name, id string) {
	ctx := context.Background()
	r, err := callVerb(ctx, d, "deploy", id)
	if err != nil {
		t.Fatal(err)
	}
	awaitState(t, d, id, "deploying")
	if _, err := d.API.Metal.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: id})); code(err) != "INVALID_INPUT" || errField(err) != "reason" {
		t.Errorf("metal.abort without a reason = %v (%s), want INVALID_INPUT naming reason", err, code(err))
	}
	// A NUL once passed here and wedged the node: its state update failed
	// INTERNAL, retried for minutes, and left it with no workflow.
	for _, reason := range []string{"wrong\x00image", "line\nbreak", strings.Repeat("r", 2048)} {
		_, err := d.API.Metal.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: id, Reason: reason}))
		if code(err) != "INVALID_INPUT" || errField(err) != "reason" {
			t.Errorf("metal.abort(reason %.12q) = %v (%s), want INVALID_INPUT naming reason", reason, err, code(err))
		}
	}
	if n := node(t, d, id); n.State != "deploying" {
		t.Errorf("node after refused aborts = %s, want deploying, untouched", n.State)
	}
	if _, err := d.API.Metal.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: id, Reason: "wrong image"})); err != nil {
		t.Fatalf("metal.abort = %v", err)
	}
	if err := d.Wait(ctx, name, id, "failed", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := workflowDone(t, d, r); err == nil {
		t.Errorf("aborted deploy workflow = nil, want it cancelled")
	}
	n := node(t, d, id)
	if n.FailedFrom != "deploying" || !strings.Contains(n.LastError, "wrong image") {
		t.Errorf("aborted node = failedFrom %q lastError %q, want deploying and the reason", n.FailedFrom, n.LastError)
	}
	refusedVerbs(t, d, id, "failed", "abort", "deploy", "undeploy", "provide")
	if err := doVerb(t, d, name, id, "recover", "ready"); err != nil {
		t.Errorf("metal.recover workflow = %v", err)
	}
}

// retireModes returns the wipe modes the node's retire workflow attested.
func retireModes(t *testing.T, d *demo.Demo, id string) string {
	t.Helper()
	var res wf.Result
	if err := d.CP.Client().GetWorkflow(context.Background(), wf.WorkflowID(id), "").Get(context.Background(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Attestation == nil {
		t.Fatalf("retire's result has no attestation")
	}
	return res.Attestation.Mode
}
