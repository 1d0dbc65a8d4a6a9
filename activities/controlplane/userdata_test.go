package controlplane_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/sdk/iso"
	"github.com/better-compute/better-compute/store"
)

var tokenInUserData = regexp.MustCompile(`--token, '([^']+)'`)

// TestRenderUserData: the node's user data is rendered from its profile's
// template with the node's facts and a fresh single-use provisioned token
// (one a render, only for a template that uses it), published in the same
// transaction as a cidata seed behind the node's site; the output holds
// only the seed's path and digest. A missing secret, another tenant's and
// a control plane without Artifacts are refused.
func TestRenderUserData(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t)
	if err := f.s.SetArtifactsURL(t.Context(), f.site, "http://10.0.0.2:8080"); err != nil {
		t.Fatal(err)
	}
	f.act.PKI = controlplane.JoinTokens{Now: func() time.Time { return f.now }}
	put := func(name, tmpl string) {
		b, _ := json.Marshal(map[string]string{"userData": tmpl})
		if _, _, err := f.s.PutSecret(t.Context(), f.tenant, name, b); err != nil {
			t.Fatal(err)
		}
	}
	put("ud", "#cloud-config\nhostname: {{hostname}}\nruncmd: [[bcd, node, --token, '{{joinToken}}']]\n")
	put("plain", "#cloud-config\nhostname: {{hostname}}\n")
	const field = "profile.steps[0].with.userDataRef"
	render := func(ref, owner string) (kinds.UserDataOutput, error) {
		return f.act.RenderUserData(t.Context(), kinds.UserDataInput{TenantID: f.tenant, NodeID: node, Owner: owner, Ref: ref, Field: field})
	}
	if _, err := render("secret://acme/ud", f.tenant); errs.FromTemporal(err) != errs.Unsupported {
		t.Errorf("RenderUserData without Artifacts = %v, want UNSUPPORTED", err)
	}
	f.act.Artifacts = controlplane.ArtifactStore{Now: func() time.Time { return f.now }}
	var tokens []string
	for range 2 {
		out, err := render("secret://acme/ud", f.tenant)
		if err != nil {
			t.Fatalf("RenderUserData = %v", err)
		}
		userData := f.seedUserData(t, out)
		if !strings.Contains(userData, "hostname: "+strings.ReplaceAll(node, "_", "-")+"\n") {
			t.Errorf("user-data = %q, want the node's host name", userData)
		}
		m := tokenInUserData.FindStringSubmatch(userData)
		if m == nil || !strings.HasPrefix(m[1], "bc"+string(pki.TokenProvisioned)+"_") {
			t.Fatalf("user-data = %q, want a provisioned token", userData)
		}
		if b, _ := json.Marshal(out); bytes.Contains(b, []byte(m[1])) || bytes.Contains(b, []byte("cloud-config")) {
			t.Errorf("RenderUserData's output %s holds the token or the data", b)
		}
		tokens = append(tokens, m[1])
	}
	if tokens[0] == tokens[1] {
		t.Errorf("two renders gave the same token, want a fresh one each")
	}
	if _, err := render("secret://acme/plain", f.tenant); err != nil {
		t.Fatal(err)
	}
	var n int
	f.s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM join_tokens WHERE node_id = $1 AND kind = $2`, node, string(pki.TokenProvisioned)).Scan(&n)
	if n != 2 {
		t.Errorf("provisioned tokens issued = %d, want 2 (none for a template without {{joinToken}})", n)
	}
	for _, tc := range []struct{ ref, owner string }{{"secret://acme/missing", f.tenant}, {"secret://root/ud", f.tenant}} {
		if _, err := render(tc.ref, tc.owner); errs.FromTemporal(err) != errs.InvalidInput || !strings.Contains(err.Error(), field) {
			t.Errorf("RenderUserData(%s) = %v, want INVALID_INPUT naming %s", tc.ref, err, field)
		}
	}
}

// seedUserData reads the user-data file of the seed out names, as the
// node's site serves it.
func (f *fixture) seedUserData(t *testing.T, out kinds.UserDataOutput) string {
	t.Helper()
	id, name, _ := strings.Cut(strings.TrimPrefix(out.Path, "/artifacts/"), "/")
	a, seed, err := f.s.SiteArtifact(t.Context(), f.site, id, f.now)
	if err != nil || name != "cidata.iso" || a.SHA256 != out.SHA256 {
		t.Fatalf("the published seed %s = %+v, %v, want cidata.iso with the output's digest", out.Path, a, err)
	}
	b, err := iso.ReadFile(bytes.NewReader(seed), "user-data")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
