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

func TestDeclareServeHosts(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	lab, _, err := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "shared", Region: "lab-1", LoopbackLab: true})
	if err != nil || !lab.LoopbackLab || len(lab.ServeHosts) != 0 {
		t.Fatalf("CreateSite(loopback lab) = %+v, %v; want a lab with no serve hosts", lab, err)
	}
	other, _, _ := s.CreateSite(ctx, store.Site{TenantID: "b", Kind: "shared", Region: "r"})
	if err := s.DeclareServeHosts(ctx, "a", lab.ID, []string{"relay.a.test", "127.0.0.1"}, []string{"relay.a.test"}); err != nil {
		t.Fatalf("DeclareServeHosts(lab) = %v", err)
	}
	got, _ := s.GetSite(ctx, "a", lab.ID)
	if diff := cmp.Diff([]string{"relay.a.test", "127.0.0.1"}, got.ServeHosts); diff != "" {
		t.Errorf("GetSite().ServeHosts (-want +got):\n%s", diff)
	}
	// Another site, even of another tenant, cannot claim an exclusive name;
	// loopback, left out of exclusive, is shared by labs.
	err = s.DeclareServeHosts(ctx, "b", other.ID, []string{"relay.a.test"}, []string{"relay.a.test"})
	wantKind(t, "DeclareServeHosts(another site's name)", err, errs.PermissionDenied)
	if err == nil || !strings.Contains(err.Error(), "relay.a.test") || strings.Contains(err.Error(), lab.ID) {
		t.Errorf("DeclareServeHosts(another site's name) = %v; want the name, not the other site", err)
	}
	if err := s.DeclareServeHosts(ctx, "b", other.ID, []string{"127.0.0.1"}, nil); err != nil {
		t.Errorf("DeclareServeHosts(loopback, not exclusive) = %v", err)
	}
	err = s.DeclareServeHosts(ctx, "a", other.ID, nil, nil)
	wantKind(t, "DeclareServeHosts(another tenant's site)", err, errs.NotFound)
	tooMany := make([]string, 17)
	for i := range tooMany {
		tooMany[i] = strings.Repeat("x", i+1) + ".test"
	}
	if err := s.DeclareServeHosts(ctx, "a", lab.ID, tooMany, nil); err == nil {
		t.Errorf("DeclareServeHosts(17 hosts) = nil, want the bound refused")
	}
}
