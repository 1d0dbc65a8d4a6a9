package store_test

import (
	"encoding/json"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/store"
)

// TestTenantIsolation: tenant b can neither get nor list tenant a's objects.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	pool, err := s.CreatePool(ctx, store.Pool{TenantID: "a", SiteID: site.ID, Class: "metal-host", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := s.CreateImage(ctx, store.Image{TenantID: "a", Name: "ubuntu", Source: "s", Digest: "d", Format: "raw", Compression: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProfile(ctx, store.Profile{TenantID: "a", ID: "p", Version: 1, Document: json.RawMessage(`{}`), Visibility: "private"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		get   func(tenant string) error
		count func(tenant string) (int, error)
	}{
		{"site",
			func(tn string) error { _, err := s.GetSite(ctx, tn, site.ID); return err },
			func(tn string) (int, error) { l, err := s.ListSites(ctx, tn); return len(l), err }},
		{"pool",
			func(tn string) error { _, err := s.GetPool(ctx, tn, pool.ID); return err },
			func(tn string) (int, error) { l, err := s.ListPools(ctx, tn, ""); return len(l), err }},
		{"pool by site",
			func(tn string) error { _, err := s.GetPool(ctx, tn, pool.ID); return err },
			func(tn string) (int, error) { l, err := s.ListPools(ctx, tn, site.ID); return len(l), err }},
		{"image",
			func(tn string) error { _, err := s.GetImage(ctx, tn, img.ID); return err },
			func(tn string) (int, error) { l, err := s.ListImages(ctx, tn); return len(l), err }},
		{"profile",
			func(tn string) error { _, err := s.GetProfile(ctx, tn, "p", 0); return err },
			func(tn string) (int, error) { l, err := s.ListProfiles(ctx, tn); return len(l), err }},
	}
	for _, tt := range tests {
		if err := tt.get("a"); err != nil {
			t.Errorf("get %s as a = %v, want nil", tt.name, err)
		}
		wantKind(t, "get "+tt.name+" as b", tt.get("b"), errs.NotFound)
		if n, err := tt.count("a"); n != 1 || err != nil {
			t.Errorf("list %s as a = %d, %v; want 1, nil", tt.name, n, err)
		}
		if n, err := tt.count("b"); n != 0 || err != nil {
			t.Errorf("list %s as b = %d, %v; want 0, nil", tt.name, n, err)
		}
	}
}
