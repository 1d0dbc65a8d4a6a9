package store_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
)

func TestCreateSite(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	a1, created, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "shared", Region: "lab-1"})
	if err != nil || !created {
		t.Fatalf("CreateSite(a, no key) = %v, %v; want created", created, err)
	}
	if !ids.Valid(ids.Site, a1.ID) || a1.CreatedAt.IsZero() {
		t.Errorf("CreateSite(a) = %+v, want a site_ id and a creation time", a1)
	}
	a2, created, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "shared", Region: "lab-1"})
	if err != nil || !created || a2.ID == a1.ID {
		t.Fatalf("CreateSite(a, no key) again = %s, %v, %v; want a second site", a2.ID, created, err)
	}
	keyed, created, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "dedicated", Region: "lab-2", Key: "lab-2"})
	if err != nil || !created {
		t.Fatalf("CreateSite(a, key lab-2) = %v, %v; want created", created, err)
	}
	again, created, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "other", Region: "x", Key: "lab-2"})
	if err != nil || created {
		t.Fatalf("CreateSite(a, key lab-2) again = %v, %v; want existing", created, err)
	}
	if diff := cmp.Diff(keyed, again); diff != "" {
		t.Errorf("CreateSite(same key) (-first +again):\n%s", diff)
	}
	// Keys are per tenant.
	b, created, err := s.CreateSite(ctx, store.Site{TenantID: "b", Kind: "shared", Region: "lab-2", Key: "lab-2"})
	if err != nil || !created || b.ID == keyed.ID {
		t.Fatalf("CreateSite(b, key lab-2) = %s, %v, %v; want a new site", b.ID, created, err)
	}
	_, _, err = s.CreateSite(ctx, store.Site{TenantID: "nobody", Kind: "shared", Region: "r"})
	wantKind(t, "CreateSite(unknown tenant)", err, errs.NotFound)

	got, err := s.GetSite(ctx, "a", keyed.ID)
	if err != nil {
		t.Fatalf("GetSite(a, %s) = %v", keyed.ID, err)
	}
	if diff := cmp.Diff(keyed, got); diff != "" {
		t.Errorf("GetSite() (-created +got):\n%s", diff)
	}
	list, err := s.ListSites(ctx, "a")
	if err != nil {
		t.Fatalf("ListSites(a) = %v", err)
	}
	if diff := cmp.Diff(byID(siteID, a1, a2, keyed), list); diff != "" {
		t.Errorf("ListSites(a) (-want +got):\n%s", diff)
	}
}

func TestCreateSiteConcurrentKey(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	sites, errOut := concurrently(8, func(int) (store.Site, error) {
		site, created, err := s.CreateSite(t.Context(), store.Site{TenantID: "a", Kind: "shared", Region: "r", Key: "k"})
		if created {
			site.Kind = "created" // marks the one winner
		}
		return site, err
	})
	winners := 0
	for i, err := range errOut {
		if err != nil {
			t.Fatalf("CreateSite(key k) #%d = %v", i, err)
		}
		if sites[i].Kind == "created" {
			winners++
		}
		if sites[i].ID != sites[0].ID {
			t.Errorf("CreateSite(key k) #%d = %s, want %s", i, sites[i].ID, sites[0].ID)
		}
	}
	if winners != 1 {
		t.Errorf("CreateSite(key k) created %d times, want 1", winners)
	}
	if list, _ := s.ListSites(t.Context(), "a"); len(list) != 1 {
		t.Errorf("ListSites(a) = %d sites, want 1", len(list))
	}
}

func TestGetSiteNotFoundMessage(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	_, err := s.GetSite(t.Context(), "a", "site_missing")
	wantKind(t, "GetSite(missing)", err, errs.NotFound)
	if !strings.Contains(err.Error(), "site_missing") {
		t.Errorf("GetSite(missing) = %v, want the id named", err)
	}
}
