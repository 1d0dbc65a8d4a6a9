package store_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
)

func TestPools(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	other, _, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "shared", Region: "lab-2"})
	if err != nil {
		t.Fatal(err)
	}
	policy := store.PoolPolicy{
		HardwareProfile:          "emulated-redfish",
		TrustProvisioningNetwork: true,
		ProvisioningCidrs:        []string{"10.0.0.0/24", "fd00::/64"},
	}
	p1, err := s.CreatePool(ctx, store.Pool{TenantID: "a", SiteID: site.ID, Class: "metal-host", Agent: "bcd", Policy: policy})
	if err != nil {
		t.Fatalf("CreatePool(a) = %v", err)
	}
	want := store.Pool{ID: p1.ID, TenantID: "a", SiteID: site.ID, Class: "metal-host", Agent: "bcd", Policy: policy}
	if diff := cmp.Diff(want, p1, ignoreCreated); diff != "" || !ids.Valid(ids.Pool, p1.ID) {
		t.Errorf("CreatePool() = %s (-want +got):\n%s", p1.ID, diff)
	}
	p2, err := s.CreatePool(ctx, store.Pool{TenantID: "a", SiteID: other.ID, Class: "talos", Agent: "none"})
	if err != nil {
		t.Fatalf("CreatePool(a, other site) = %v", err)
	}
	got, err := s.GetPool(ctx, "a", p1.ID)
	if diff := cmp.Diff(p1, got); err != nil || diff != "" {
		t.Errorf("GetPool(a, %s) = %v (-created +got):\n%s", p1.ID, err, diff)
	}
	lists := []struct {
		site string
		want []store.Pool
	}{
		{"", byID(poolID, p1, p2)},
		{site.ID, []store.Pool{p1}},
		{other.ID, []store.Pool{p2}},
		{"site_none", []store.Pool{}},
	}
	for _, tt := range lists {
		got, err := s.ListPools(ctx, "a", tt.site)
		if diff := cmp.Diff(tt.want, got); err != nil || diff != "" {
			t.Errorf("ListPools(a, %q) = %v (-want +got):\n%s", tt.site, err, diff)
		}
	}
}

func TestCreatePoolNeedsSiteInTenant(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	for _, p := range []store.Pool{
		{TenantID: "a", SiteID: "site_missing", Class: "c", Agent: "bcd"},
		{TenantID: "b", SiteID: site.ID, Class: "c", Agent: "bcd"}, // a's site
	} {
		_, err := s.CreatePool(t.Context(), p)
		wantKind(t, "CreatePool("+p.TenantID+", "+p.SiteID+")", err, errs.NotFound)
		if err != nil && !strings.Contains(err.Error(), p.SiteID) {
			t.Errorf("CreatePool(%s, %s) = %v, want the site named", p.TenantID, p.SiteID, err)
		}
	}
}
