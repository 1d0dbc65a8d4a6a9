package store_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// TestNamedSecrets: put seals a value under a name, a second put replaces
// it (and says so), list shows names and times only, and another tenant
// neither opens nor deletes it.
func TestNamedSecrets(t *testing.T) {
	t.Parallel()
	s, ctx := newTenants(t), t.Context()
	first, replaced, err := s.PutSecret(ctx, "a", "bmc-r12-14", []byte(`{"username":"root","password":"one"}`))
	if err != nil || replaced {
		t.Fatalf("PutSecret(a, bmc-r12-14) = %v, replaced %v; want nil, false", err, replaced)
	}
	second, replaced, err := s.PutSecret(ctx, "a", "bmc-r12-14", []byte(`{"username":"root","password":"two"}`))
	if err != nil || !replaced {
		t.Fatalf("PutSecret(a, bmc-r12-14) again = %v, replaced %v; want nil, true", err, replaced)
	}
	if !second.CreatedAt.Equal(first.CreatedAt) || !second.UpdatedAt.After(first.UpdatedAt) {
		t.Errorf("PutSecret again = created %v updated %v, want created %v and a later update", second.CreatedAt, second.UpdatedAt, first.CreatedAt)
	}
	got, err := s.OpenSecret(ctx, "a", "bmc-r12-14")
	if err != nil || !bytes.Contains(got, []byte(`"two"`)) {
		t.Fatalf("OpenSecret(a, bmc-r12-14) = %q, %v; want the replaced value", got, err)
	}
	_, err = s.OpenSecret(ctx, "b", "bmc-r12-14")
	wantKind(t, "OpenSecret(b, bmc-r12-14)", err, errs.NotFound)
	wantKind(t, "DeleteSecret(b, bmc-r12-14)", s.DeleteSecret(ctx, "b", "bmc-r12-14"), errs.NotFound)
	if ok, err := s.SecretExists(ctx, "b", "bmc-r12-14"); ok || err != nil {
		t.Errorf("SecretExists(b, bmc-r12-14) = %v, %v; want false, nil", ok, err)
	}

	// A secret sealed from inline credentials has no name: it is not listed.
	if _, err := s.CreateSecret(ctx, "a", []byte(`{"username":"u","password":"p"}`)); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListSecrets(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Secret{{Name: "bmc-r12-14", CreatedAt: second.CreatedAt, UpdatedAt: second.UpdatedAt}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("ListSecrets(a) mismatch (-want +got):\n%s", diff)
	}
	if err := s.DeleteSecret(ctx, "a", "bmc-r12-14"); err != nil {
		t.Fatalf("DeleteSecret(a, bmc-r12-14) = %v, want nil", err)
	}
	_, err = s.OpenSecret(ctx, "a", "bmc-r12-14")
	wantKind(t, "OpenSecret after delete", err, errs.NotFound)
}

// TestSecretNameRefused: the table itself refuses a name that is not a
// plain word, whatever the caller checked.
func TestSecretNameRefused(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	for _, name := range []string{"", "Bmc", "a/b", "sec_01", "-x", strings.Repeat("x", 64)} {
		if _, _, err := s.PutSecret(t.Context(), "a", name, []byte("u:p")); err == nil {
			t.Errorf("PutSecret(a, %q) = nil, want an error", name)
		}
	}
}

// TestDeleteSecretInUse: a secret a live node uses is not deleted, and the
// error names the node; once the node is retired it is.
func TestDeleteSecretInUse(t *testing.T) {
	t.Parallel()
	s, ctx := newTenants(t), t.Context()
	if _, _, err := s.PutSecret(ctx, "a", "shared", []byte(`{"username":"u","password":"p"}`)); err != nil {
		t.Fatal(err)
	}
	site, _, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "shared", Region: "lab-1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePool(ctx, store.Pool{TenantID: "a", SiteID: site.ID, Class: "metal-host", Agent: "none"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "a", SiteID: site.ID, PoolID: p.ID,
		BMCAddress: "https://bmc-1.test/redfish/v1/Systems/1", BMCDriver: "redfish", BMCCredentialsRef: store.SecretRef("a", "shared")})
	if err != nil {
		t.Fatal(err)
	}
	err = s.DeleteSecret(ctx, "a", "shared")
	wantKind(t, "DeleteSecret(a, shared) in use", err, errs.InvalidState)
	if !strings.Contains(err.Error(), n.ID) {
		t.Errorf("DeleteSecret(a, shared) = %v, want it to name node %s", err, n.ID)
	}
	if ok, _ := s.SecretExists(ctx, "a", "shared"); !ok {
		t.Fatalf("SecretExists(a, shared) after a refused delete = false, want true")
	}
	for _, step := range [][2]nodestate.State{{nodestate.Enrolling, nodestate.Retiring}, {nodestate.Retiring, nodestate.Retired}} {
		if err := s.Transition(ctx, "a", n.ID, step[0], step[1], store.TransitionInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteSecret(ctx, "a", "shared"); err != nil {
		t.Errorf("DeleteSecret(a, shared) after retire = %v, want nil", err)
	}
}
