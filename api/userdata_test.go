package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/store"
)

// deployEnv is an API whose Temporal counts the workflows started, and a
// site with a pool for each of root and acme.
type deployEnv struct {
	*env
	started      *atomic.Int32
	sites, pools map[string]string // by tenant
}

func newDeployEnv(t *testing.T) *deployEnv {
	t.Helper()
	e := newEnv(t)
	ctx := context.Background()
	d := &deployEnv{env: e, started: &atomic.Int32{}, sites: map[string]string{}, pools: map[string]string{}}
	srv := httptest.NewServer(api.New(api.Config{Store: e.store, Temporal: starts{n: d.started}}).Handler())
	t.Cleanup(srv.Close)
	d.url = srv.URL
	for _, tenant := range []string{"root", "acme"} {
		site, _, err := e.store.CreateSite(ctx, store.Site{TenantID: tenant, Kind: "shared", Region: "r"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.store.CreatePool(ctx, store.Pool{TenantID: tenant, SiteID: site.ID, Class: "c", Agent: "bcd"})
		if err != nil {
			t.Fatal(err)
		}
		d.sites[tenant], d.pools[tenant] = site.ID, p.ID
	}
	return d
}

// readyNode is a ready Redfish node of tenant.
func (d *deployEnv) readyNode(t *testing.T, tenant string) string {
	t.Helper()
	ctx := context.Background()
	n, err := d.store.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: tenant, SiteID: d.sites[tenant], PoolID: d.pools[tenant],
		BMCAddress: "10.0.0.9", BMCDriver: "redfish", BMCCredentialsRef: "env://BCD_SECRET_BMC"})
	if err != nil {
		t.Fatal(err)
	}
	wipe := "wipe_" + n.ID
	if _, err := d.store.Pool().Exec(ctx, `INSERT INTO wipe_records (id, tenant_id, node_id, workflow_id, run_id, kind) VALUES ($1, $2, $3, 'wf', 'run', 'attested')`, wipe, tenant, n.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.Pool().Exec(ctx, `UPDATE metal_nodes SET state = 'ready', ready_by = $2 WHERE id = $1`, n.ID, wipe); err != nil {
		t.Fatal(err)
	}
	return n.ID
}

// profile stores version 1 of tenant's profile id with steps.
func (d *deployEnv) profile(t *testing.T, tenant, id, visibility string, st ...provision.Step) {
	t.Helper()
	doc, _ := json.Marshal(provision.Profile{ID: id, Version: 1, Target: "metal", Role: "host", Steps: st, Visibility: visibility})
	if err := d.store.CreateProfile(context.Background(), store.Profile{TenantID: tenant, ID: id, Version: 1, Document: doc, Visibility: visibility}); err != nil {
		t.Fatal(err)
	}
}

func (d *deployEnv) image(t *testing.T, tok string) string {
	t.Helper()
	return nested(d.ok(tok, imagesReg, `{"name":"u","source":"http://cache/u.raw.zst","digest":"sha256:`+strings.Repeat("ab", 32)+`","format":"raw","compression":"zstd","size":1048576}`), "image", "id")
}

// deploy deploys profile v1 on node as tok and says whether a workflow
// started, with the error's kind, field and message otherwise.
func (d *deployEnv) deploy(t *testing.T, tok, node, profile string) (started bool, kind, field_, msg string) {
	t.Helper()
	n0 := d.started.Load()
	_, out := d.call(tok, metalDeployPath, fmt.Sprintf(`{"nodeId":%q,"profile":%q,"profileVersion":1}`, node, profile))
	msg, _ = out["message"].(string)
	return d.started.Load() > n0, kindOf(out), field(out), msg
}

func putSecret(t *testing.T, s *store.Store, tenant, name, value string) {
	t.Helper()
	if _, _, err := s.PutSecret(context.Background(), tenant, name, []byte(value)); err != nil {
		t.Fatal(err)
	}
}

// TestDeployRefusesUnrenderableUserData: a deploy.image whose userDataRef
// is not a secret of the profile's tenant that holds a template rendering
// with the node's facts is refused before the node moves, INVALID_INPUT
// naming profile.steps[0].with.userDataRef without the template in the
// message; a good one (put with secrets put) starts the deploy.
func TestDeployRefusesUnrenderableUserData(t *testing.T) {
	t.Parallel()
	d := newDeployEnv(t)
	const tmpl = `#cloud-config\nhostname: {{hostname}}\nruncmd: [[bcd, node, --token, '{{joinToken}}']]\n`
	value, _ := json.Marshal([]byte(`{"userData":"` + tmpl + `"}`)) // a bytes field: base64 in JSON
	d.ok(d.root, secretsPut, `{"name":"ud-good","value":`+string(value)+`}`)
	putSecret(t, d.store, "root", "ud-bmc", `{"username":"u","password":"p"}`)
	putSecret(t, d.store, "root", "ud-typo", `{"userData":"#cloud-config\nhostname: {{hostnme}}\n"}`)
	putSecret(t, d.store, "acme", "ud-acme", `{"userData":"`+tmpl+`"}`)
	img := d.image(t, d.root)
	node := d.readyNode(t, "root")
	for _, tc := range []struct{ ref, message string }{
		{"secret://root/missing", "does not exist"},
		{"vault://kv/ud", "want secret://<tenant>/<name>"},
		{"secret://acme/ud-acme", "a secret of the profile's tenant root"},
		{"secret://root/ud-bmc", "holds no userData template"},
		{"secret://root/ud-typo", "hostnme"},
	} {
		id := "p" + fmt.Sprint(d.started.Load()) + strings.NewReplacer("://", "-", "/", "-", ".", "-").Replace(tc.ref)
		d.profile(t, "root", id, "private", provision.Step{Use: "deploy.image", With: map[string]any{"image": img, "userDataRef": tc.ref}})
		before := rowCounts(t, d.store)
		n0, _ := d.store.GetNode(context.Background(), "root", node)
		started, kind, f, msg := d.deploy(t, d.root, node, id)
		if started || kind != "INVALID_INPUT" || f != "profile.steps[0].with.userDataRef" || !strings.Contains(msg, tc.message) || strings.Contains(msg, "cloud-config") {
			t.Errorf("deploy with userDataRef %s = started %v, %s %s %q; want INVALID_INPUT naming profile.steps[0].with.userDataRef saying %q (no template)", tc.ref, started, kind, f, msg, tc.message)
		}
		n1, _ := d.store.GetNode(context.Background(), "root", node)
		if n1.State != n0.State || !n1.UpdatedAt.Equal(n0.UpdatedAt) {
			t.Errorf("node after the refused deploy = %s, want %s unchanged", n1.State, n0.State)
		}
		if after := rowCounts(t, d.store); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("rows after the refused deploy = %v, want %v", after, before)
		}
	}
	d.profile(t, "root", "good", "private", provision.Step{Use: "deploy.image", With: map[string]any{"image": img, "userDataRef": "secret://root/ud-good"}})
	if started, kind, f, msg := d.deploy(t, d.root, node, "good"); !started {
		t.Errorf("deploy with a good userDataRef = %s %s %q, want it started", kind, f, msg)
	}
}

// TestPublicProfileImagesAcrossTenants: acme deploys root's public profile,
// whose deploy.image names root's catalog image, and it starts; a public
// profile of root's stored with root's user data (before create and update
// refused it) is refused to acme, INVALID_INPUT naming its userDataRef,
// the node unchanged: root's secret is not rendered onto acme's machine.
// acme's own profile naming root's image is still refused (the image is
// resolved in the owner's catalog only for the profile the owner made
// public).
func TestPublicProfileImagesAcrossTenants(t *testing.T) {
	t.Parallel()
	d := newDeployEnv(t)
	putSecret(t, d.store, "root", "ud", `{"userData":"#cloud-config\nhostname: {{hostname}}\n"}`)
	img := d.image(t, d.root)
	d.profile(t, "root", "pub", "public", provision.Step{Use: "deploy.image", With: map[string]any{"image": img}},
		provision.Step{Use: "boot.kexec"})
	d.profile(t, "root", "pubud", "public", provision.Step{Use: "deploy.image", With: map[string]any{"image": img, "userDataRef": "secret://root/ud"}},
		provision.Step{Use: "boot.kexec"})
	d.profile(t, "acme", "mine", "private", provision.Step{Use: "deploy.image", With: map[string]any{"image": img}})
	node := d.readyNode(t, "acme")
	if started, kind, f, msg := d.deploy(t, d.acme, node, "pub"); !started {
		t.Errorf("acme deploys root's public profile naming root's image = %s %s %q, want it started", kind, f, msg)
	}
	n0, _ := d.store.GetNode(context.Background(), "acme", node)
	if started, kind, f, _ := d.deploy(t, d.acme, node, "pubud"); started || kind != "INVALID_INPUT" || f != "profile.steps[0].with.userDataRef" {
		t.Errorf("acme deploys root's public profile with root's user data = started %v, %s %s; want INVALID_INPUT profile.steps[0].with.userDataRef", started, kind, f)
	}
	if n1, _ := d.store.GetNode(context.Background(), "acme", node); n1.State != n0.State || !n1.UpdatedAt.Equal(n0.UpdatedAt) {
		t.Errorf("node after the refused deploy = %s, want %s unchanged", n1.State, n0.State)
	}
	if started, kind, f, _ := d.deploy(t, d.acme, node, "mine"); started || kind != "INVALID_INPUT" || f != "profile.steps[0].with.image" {
		t.Errorf("acme deploys its own profile naming root's image = started %v, %s %s; want INVALID_INPUT profile.steps[0].with.image", started, kind, f)
	}
}

// TestPublicProfileRefusesUserData: profiles create of a public profile
// with a userDataRef, and update --visibility public of a profile with
// one (every version, or that version), are INVALID_INPUT naming
// profile.steps[i].with.userDataRef, nothing written.
func TestPublicProfileRefusesUserData(t *testing.T) {
	t.Parallel()
	d := newDeployEnv(t)
	putSecret(t, d.store, "root", "ud", `{"userData":"#cloud-config\nhostname: {{hostname}}\n"}`)
	img := d.image(t, d.root)
	doc := `{"profile":{"id":"shared","version":1,"target":"metal","role":"host","visibility":"public","steps":[` +
		`{"use":"power.setPower","with":{"action":"cycle"}},{"use":"deploy.image","with":{"image":"` + img + `","userDataRef":"secret://root/ud"}}]}}`
	if code, out := d.call(d.root, profCreate, doc); kindOf(out) != "INVALID_INPUT" || field(out) != "profile.steps[1].with.userDataRef" {
		t.Errorf("profiles.create public with user data = %d %v, want INVALID_INPUT profile.steps[1].with.userDataRef", code, out)
	}
	if _, err := d.store.GetProfile(context.Background(), "root", "shared", 0); !errs.Is(err, errs.NotFound) {
		t.Errorf("GetProfile(root, shared) after the refused create = %v, want NOT_FOUND", err)
	}
	d.profile(t, "root", "ud", "private", provision.Step{Use: "deploy.image", With: map[string]any{"image": img, "userDataRef": "secret://root/ud"}})
	for _, body := range []string{`{"id":"ud","visibility":"public"}`, `{"id":"ud","profileVersion":1,"visibility":"public"}`} {
		if code, out := d.call(d.root, profUpdate, body); kindOf(out) != "INVALID_INPUT" || field(out) != "profile.steps[0].with.userDataRef" {
			t.Errorf("profiles.update %s = %d %v, want INVALID_INPUT profile.steps[0].with.userDataRef", body, code, out)
		}
	}
	if p, err := d.store.GetProfile(context.Background(), "root", "ud", 1); err != nil || p.Visibility != "private" {
		t.Errorf("GetProfile(root, ud) after the refused update = %q, %v; want it private", p.Visibility, err)
	}
}
