package controlplane_test

import (
	"encoding/json"
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/store"
)

// TestGetProfileOfCheckedOwner: the deploy checked owner's public profile
// (Owner in profile.get's input); the caller then creates its own profile
// of that id, which shadows the public one: profile.get still returns the
// owner's, the one checked. Once the owner makes it private, profile.get
// fails final (NOT_FOUND, not retried) rather than run another profile.
// Without Owner (a run from before) it reads what the tenant reads now.
func TestGetProfileOfCheckedOwner(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	ctx := t.Context()
	if err := f.s.CreateTenant(ctx, "owner"); err != nil {
		t.Fatal(err)
	}
	put := func(tenant, role, visibility string) {
		doc, _ := json.Marshal(provision.Profile{ID: "p", Version: 1, Target: "metal", Role: role, Visibility: visibility,
			Steps: []provision.Step{{Use: "power.setPower", With: map[string]any{"action": "cycle"}}}})
		if err := f.s.CreateProfile(ctx, store.Profile{TenantID: tenant, ID: "p", Version: 1, Document: doc, Visibility: visibility}); err != nil {
			t.Fatal(err)
		}
	}
	put("owner", "checked", store.Public)
	put(f.tenant, "shadow", "private") // after the deploy's check
	in := kinds.ProfileInput{TenantID: f.tenant, ProfileID: "p", Version: 1, Owner: "owner"}
	if got, err := f.act.GetProfile(ctx, in); err != nil || got.Owner != "owner" || got.Role != "checked" {
		t.Errorf("GetProfile(Owner owner, shadowed) = owner %q role %q, %v; want owner's checked profile", got.Owner, got.Role, err)
	}
	if got, err := f.act.GetProfile(ctx, kinds.ProfileInput{TenantID: f.tenant, ProfileID: "p", Version: 1}); err != nil || got.Role != "shadow" {
		t.Errorf("GetProfile(no Owner) = role %q, %v; want the tenant's own, as before", got.Role, err)
	}
	if _, err := f.s.SetProfileVisibility(ctx, "owner", "p", 0, "private"); err != nil {
		t.Fatal(err)
	}
	_, err := f.act.GetProfile(ctx, in)
	var app *temporal.ApplicationError
	if errs.FromTemporal(err) != errs.NotFound || !errors.As(err, &app) || !app.NonRetryable() {
		t.Errorf("GetProfile(Owner owner, now private) = %v, want NOT_FOUND, not retried", err)
	}
}
