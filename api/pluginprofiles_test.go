package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/store"
)

// TestStorePluginProfiles: the control-plane worker stores its plugins'
// profiles in the root tenant, public, so another tenant can deploy them
// without creating them; at the next start the same document is left
// alone, and another document under the same version is kept out (versions
// never change) with an error naming the profile and the fix, the worker
// going on.
func TestStorePluginProfiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	prof := provision.Profile{ID: "acme-install", Version: 1, Target: "metal", Role: "host", Steps: []provision.Step{
		{Use: "acme.render"}, {Use: "power.setPower", With: map[string]any{"action": "cycle"}}}}
	start := func(p provision.Profile) string {
		t.Helper()
		reg, err := steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{acmeRender}, Profiles: []provision.Profile{p}})
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if err := api.StorePluginProfiles(ctx, e.store, reg, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("StorePluginProfiles = %v, want nil", err)
		}
		return logs.String()
	}
	if logs := start(prof); logs != "" {
		t.Errorf("first start logged %q, want nothing", logs)
	}
	got, err := e.store.GetProfile(ctx, "acme", prof.ID, 1)
	if err != nil || got.TenantID != api.RootTenant || got.Visibility != store.Public {
		t.Fatalf("GetProfile(acme, %s) = %s %q, %v, want root's public profile", prof.ID, got.TenantID, got.Visibility, err)
	}
	if logs := start(prof); logs != "" {
		t.Errorf("restart with the same profile logged %q, want nothing", logs)
	}
	changed := prof
	changed.Role = "worker"
	logs := start(changed)
	if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, prof.ID) || !strings.Contains(logs, "bump the version") {
		t.Errorf("restart with another document under version 1 logged %q, want an error naming %s and the fix", logs, prof.ID)
	}
	again, err := e.store.GetProfile(ctx, api.RootTenant, prof.ID, 1)
	if err != nil || !bytes.Equal(again.Document, got.Document) {
		t.Errorf("stored profile after a changed plugin = %s, %v, want it unchanged %s", again.Document, err, got.Document)
	}
}
