package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// TestJoinGivesOnlyTheTenantsCodecKey: a site agent's join answer carries
// its own tenant's payload key, and a site of another tenant gets that
// tenant's: no site receives a key that decrypts another tenant's payloads.
func TestJoinGivesOnlyTheTenantsCodecKey(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	if err := a.store.EnsureTenant(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	other, _, err := a.store.CreateSite(ctx, store.Site{TenantID: "other", Kind: "shared", Region: "r", LoopbackLab: true})
	if err != nil {
		t.Fatal(err)
	}
	for tenant, site := range map[string]string{"root": a.site, "other": other.ID} {
		plain, hash := pki.NewToken(pki.TokenSite)
		if _, _, err := a.store.CreateSiteToken(ctx, store.SiteToken{TenantID: tenant, SiteID: site, ExpiresAt: time.Now().Add(time.Hour)}, hash); err != nil {
			t.Fatal(err)
		}
		resp, _, err := a.join(t, a.client(t, nil, nil), string(plain), "site")
		if err != nil {
			t.Fatalf("Join(site of %s) = %v", tenant, err)
		}
		if got, want := string(resp.CodecKey), "key of "+tenant; got != want {
			t.Errorf("Join(site of %s) codec key = %q, want %q", tenant, got, want)
		}
	}
}
