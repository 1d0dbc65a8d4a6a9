package store_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
)

func TestProfiles(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	mk := func(id string, version int, doc string) store.Profile {
		return store.Profile{TenantID: "a", ID: id, Version: version, Document: json.RawMessage(doc), Visibility: "private"}
	}
	profiles := []store.Profile{
		mk("ubuntu", 1, `{"steps": [{"id": "image.write"}]}`),
		mk("ubuntu", 2, `{"steps": [{"id": "image.write"}, {"id": "wait.agentJoined"}]}`),
		mk("talos", 1, `{"target": "appliance"}`),
	}
	for _, p := range profiles {
		if err := s.CreateProfile(ctx, p); err != nil {
			t.Fatalf("CreateProfile(%s v%d) = %v", p.ID, p.Version, err)
		}
	}
	wantKind(t, "CreateProfile(ubuntu v1) again", s.CreateProfile(ctx, profiles[0]), errs.AlreadyExists)
	b := profiles[0]
	b.TenantID = "b"
	if err := s.CreateProfile(ctx, b); err != nil {
		t.Errorf("CreateProfile(b, ubuntu v1) = %v, want nil: ids are per tenant", err)
	}

	gets := []struct {
		id      string
		version int
		want    store.Profile
		kind    errs.Kind
	}{
		{"ubuntu", 0, profiles[1], ""},
		{"ubuntu", 1, profiles[0], ""},
		{"ubuntu", 2, profiles[1], ""},
		{"talos", 0, profiles[2], ""},
		{"ubuntu", 3, store.Profile{}, errs.NotFound},
		{"missing", 0, store.Profile{}, errs.NotFound},
	}
	for _, tt := range gets {
		got, err := s.GetProfile(ctx, "a", tt.id, tt.version)
		if errs.KindOf(err) != tt.kind {
			t.Errorf("GetProfile(a, %s, %d) = %v, want kind %q", tt.id, tt.version, err, tt.kind)
			continue
		}
		if diff := cmp.Diff(tt.want, got, ignoreCreated, equateJSON); diff != "" {
			t.Errorf("GetProfile(a, %s, %d) (-want +got):\n%s", tt.id, tt.version, diff)
		}
	}
	list, err := s.ListProfiles(ctx, "a")
	want := []store.Profile{profiles[2], profiles[0], profiles[1]} // by id, then version
	if diff := cmp.Diff(want, list, ignoreCreated, equateJSON); err != nil || diff != "" {
		t.Errorf("ListProfiles(a) = %v (-want +got):\n%s", err, diff)
	}
}

// equateJSON compares documents by meaning: jsonb normalizes spacing.
var equateJSON = cmp.Transformer("json", func(m json.RawMessage) any {
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		return string(m)
	}
	return v
})

// TestProfileVisibility: another tenant reads a public profile (its own of
// the same id shadows it) and never a private one; only the owner changes
// or deletes it; a public id belongs to one tenant.
func TestProfileVisibility(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	if err := s.EnsureTenant(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 2; v++ {
		if err := s.CreateProfile(ctx, store.Profile{TenantID: "a", ID: "ubuntu", Version: v, Document: json.RawMessage(`{}`), Visibility: "private"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.GetProfile(ctx, "b", "ubuntu", 1)
	wantKind(t, "GetProfile(b, a's private ubuntu)", err, errs.NotFound)
	_, err = s.SetProfileVisibility(ctx, "b", "ubuntu", 0, store.Public)
	wantKind(t, "SetProfileVisibility(b, a's private ubuntu)", err, errs.NotFound)

	changed, err := s.SetProfileVisibility(ctx, "a", "ubuntu", 1, store.Public)
	if err != nil || len(changed) != 1 || changed[0].Version != 1 || changed[0].Visibility != store.Public {
		t.Fatalf("SetProfileVisibility(a, ubuntu v1, public) = %+v, %v; want v1 public", changed, err)
	}
	if p, err := s.GetProfile(ctx, "b", "ubuntu", 1); err != nil || p.TenantID != "a" {
		t.Errorf("GetProfile(b, ubuntu v1) = %+v, %v; want a's public v1", p, err)
	}
	if p, err := s.GetProfile(ctx, "b", "ubuntu", 0); err != nil || p.Version != 1 {
		t.Errorf("GetProfile(b, ubuntu newest) = %+v, %v; want v1, the newest b may read", p, err)
	}
	_, err = s.GetProfile(ctx, "b", "ubuntu", 2)
	wantKind(t, "GetProfile(b, a's private ubuntu v2)", err, errs.NotFound)
	if l, err := s.ListProfiles(ctx, "b"); err != nil || len(l) != 1 || l[0].TenantID != "a" {
		t.Errorf("ListProfiles(b) = %+v, %v; want a's public ubuntu v1", l, err)
	}
	_, err = s.SetProfileVisibility(ctx, "b", "ubuntu", 1, "private")
	wantKind(t, "SetProfileVisibility(b, a's public ubuntu)", err, errs.PermissionDenied)
	_, err = s.DeleteProfile(ctx, "b", "ubuntu", 1)
	wantKind(t, "DeleteProfile(b, a's public ubuntu)", err, errs.PermissionDenied)
	err = s.CreateProfile(ctx, store.Profile{TenantID: "c", ID: "ubuntu", Version: 1, Document: json.RawMessage(`{}`), Visibility: store.Public})
	wantKind(t, "CreateProfile(c, public ubuntu)", err, errs.AlreadyExists)

	// c's own private ubuntu shadows a's public one for c.
	if err := s.CreateProfile(ctx, store.Profile{TenantID: "c", ID: "ubuntu", Version: 7, Document: json.RawMessage(`{}`), Visibility: "private"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetProfile(ctx, "c", "ubuntu", 1)
	wantKind(t, "GetProfile(c, ubuntu v1) with its own ubuntu", err, errs.NotFound)
	_, err = s.SetProfileVisibility(ctx, "c", "ubuntu", 7, store.Public)
	wantKind(t, "SetProfileVisibility(c, ubuntu v7, public)", err, errs.AlreadyExists)

	deleted, err := s.DeleteProfile(ctx, "a", "ubuntu", 0)
	if err != nil || !slices.Equal(deleted, []int{1, 2}) {
		t.Errorf("DeleteProfile(a, ubuntu) = %v, %v; want [1 2]", deleted, err)
	}
	_, err = s.GetProfile(ctx, "b", "ubuntu", 1)
	wantKind(t, "GetProfile(b, deleted ubuntu)", err, errs.NotFound)
	_, err = s.DeleteProfile(ctx, "a", "ubuntu", 0)
	wantKind(t, "DeleteProfile(a, ubuntu) again", err, errs.NotFound)
}

// TestDeletedProfileVersionsStayTaken: versions are immutable, so a deleted
// version's number is never given other content (a node deployed with
// ubuntu v1 yesterday names the document it ran); the error names the
// next free version. Another tenant's own ubuntu v1 is not affected.
func TestDeletedProfileVersionsStayTaken(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	for _, v := range []int{1, 2} {
		if err := s.CreateProfile(ctx, store.Profile{TenantID: "a", ID: "ubuntu", Version: v, Document: json.RawMessage(`{"v":1}`), Visibility: "private"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteProfile(ctx, "a", "ubuntu", 2); err != nil {
		t.Fatal(err)
	}
	err := s.CreateProfile(ctx, store.Profile{TenantID: "a", ID: "ubuntu", Version: 2, Document: json.RawMessage(`{"v":"other"}`), Visibility: "private"})
	wantKind(t, "CreateProfile(a, ubuntu v2) after deleting v2", err, errs.AlreadyExists)
	if err == nil || !strings.Contains(err.Error(), "was deleted") || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("CreateProfile(a, ubuntu v2) after deleting v2 = %v; want it to say v2 was deleted and to create version 3", err)
	}
	if _, err := s.DeleteProfile(ctx, "a", "ubuntu", 0); err != nil {
		t.Fatal(err)
	}
	err = s.CreateProfile(ctx, store.Profile{TenantID: "a", ID: "ubuntu", Version: 1, Document: json.RawMessage(`{}`), Visibility: "private"})
	wantKind(t, "CreateProfile(a, ubuntu v1) after deleting every version", err, errs.AlreadyExists)
	if err := s.CreateProfile(ctx, store.Profile{TenantID: "a", ID: "ubuntu", Version: 3, Document: json.RawMessage(`{}`), Visibility: "private"}); err != nil {
		t.Errorf("CreateProfile(a, ubuntu v3), a number never used: %v", err)
	}
	if err := s.CreateProfile(ctx, store.Profile{TenantID: "b", ID: "ubuntu", Version: 1, Document: json.RawMessage(`{}`), Visibility: "private"}); err != nil {
		t.Errorf("CreateProfile(b, ubuntu v1), another tenant's number: %v", err)
	}
}

// TestDeleteProfileInUse: a profile a node is deployed with is not
// deleted; the owner's nodes are named, another tenant's only counted.
func TestDeleteProfileInUse(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	for v := 1; v <= 2; v++ {
		if err := s.CreateProfile(ctx, store.Profile{TenantID: "a", ID: "ubuntu", Version: v, Document: json.RawMessage(`{}`), Visibility: store.Public}); err != nil {
			t.Fatal(err)
		}
	}
	n := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	if err := s.RecordDeployment(ctx, "a", n.ID, "ubuntu", 1, "host"); err != nil {
		t.Fatal(err)
	}
	bNode := nodeOf(t, s, "b")
	if err := s.RecordDeployment(ctx, "b", bNode, "ubuntu", 1, "host"); err != nil {
		t.Fatal(err)
	}
	_, err := s.DeleteProfile(ctx, "a", "ubuntu", 1)
	wantKind(t, "DeleteProfile(a, ubuntu v1) deployed", err, errs.InvalidState)
	if msg := err.Error(); !strings.Contains(msg, n.ID) || strings.Contains(msg, bNode) || !strings.Contains(msg, "1 node(s) of other tenants") {
		t.Errorf("DeleteProfile(a, ubuntu v1) = %q, want a's node named and b's counted, not named", msg)
	}
	_, err = s.DeleteProfile(ctx, "a", "ubuntu", 0)
	wantKind(t, "DeleteProfile(a, every ubuntu) with v1 deployed", err, errs.InvalidState)
	if _, err := s.GetProfile(ctx, "a", "ubuntu", 1); err != nil {
		t.Errorf("GetProfile(a, ubuntu v1) after refused delete = %v, want it kept", err)
	}
	if got, err := s.DeleteProfile(ctx, "a", "ubuntu", 2); err != nil || !slices.Equal(got, []int{2}) {
		t.Errorf("DeleteProfile(a, ubuntu v2) = %v, %v; want [2]: no node runs v2", got, err)
	}
	for _, x := range []struct{ tenant, node string }{{"a", n.ID}, {"b", bNode}} {
		if err := s.RecordDeployment(ctx, x.tenant, x.node, "", 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.DeleteProfile(ctx, "a", "ubuntu", 1); err != nil || !slices.Equal(got, []int{1}) {
		t.Errorf("DeleteProfile(a, ubuntu v1) once undeployed = %v, %v; want [1]", got, err)
	}
}

// nodeOf returns a new node of tenant in a site and pool of its own.
func nodeOf(t *testing.T, s *store.Store, tenant string) string {
	t.Helper()
	ctx := t.Context()
	site, _, err := s.CreateSite(ctx, store.Site{TenantID: tenant, Kind: "shared", Region: "lab-1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePool(ctx, store.Pool{TenantID: tenant, SiteID: site.ID, Class: "metal-host", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: tenant, SiteID: site.ID, PoolID: p.ID,
		BMCAddress: "https://bmc-" + tenant + ".test/redfish/v1/Systems/1", BMCDriver: "redfish", BMCCredentialsRef: "env://BMC"})
	if err != nil {
		t.Fatal(err)
	}
	return n.ID
}
