package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
)

// newSite returns a store with tenants a and b and a site of tenant a.
func newSite(t testing.TB) (*store.Store, store.Site) {
	t.Helper()
	s := newTenants(t)
	site, _, err := s.CreateSite(t.Context(), store.Site{TenantID: "a", Kind: "shared", Region: "lab-1"})
	if err != nil {
		t.Fatalf("CreateSite(a) = %v", err)
	}
	return s, site
}

func TestCreateSiteToken(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	expires := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	tok, created, err := s.CreateSiteToken(ctx, store.SiteToken{TenantID: "a", SiteID: site.ID, Key: "k", ExpiresAt: expires}, []byte("h1"))
	if err != nil || !created {
		t.Fatalf("CreateSiteToken(key k) = %v, %v; want created", created, err)
	}
	if !ids.Valid(ids.SiteToken, tok.ID) || !tok.ExpiresAt.Equal(expires) || tok.UsedAt != nil {
		t.Errorf("CreateSiteToken() = %+v, want a stok_ id, expiry %v, unused", tok, expires)
	}
	again, created, err := s.CreateSiteToken(ctx, store.SiteToken{TenantID: "a", SiteID: site.ID, Key: "k", ExpiresAt: expires}, []byte("h2"))
	if err != nil || created {
		t.Fatalf("CreateSiteToken(key k) again = %v, %v; want existing", created, err)
	}
	if diff := cmp.Diff(tok, again); diff != "" {
		t.Errorf("CreateSiteToken(same key) (-first +again):\n%s", diff)
	}
	// The second call's hash was not stored: only the first secret works.
	if _, err := s.ConsumeSiteToken(ctx, []byte("h2"), time.Now(), spendSite); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("ConsumeSiteToken(second hash) = %v, want UNAUTHENTICATED", err)
	}
	_, _, err = s.CreateSiteToken(ctx, store.SiteToken{TenantID: "b", SiteID: site.ID, ExpiresAt: expires}, []byte("h3"))
	wantKind(t, "CreateSiteToken(other tenant's site)", err, errs.NotFound)
	if err != nil && !strings.Contains(err.Error(), site.ID) {
		t.Errorf("CreateSiteToken(other tenant's site) = %v, want the site named", err)
	}
}

func TestCreateSiteTokenConcurrentKey(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	toks, errOut := concurrently(8, func(i int) (store.SiteToken, error) {
		tok, _, err := s.CreateSiteToken(t.Context(), store.SiteToken{
			TenantID: "a", SiteID: site.ID, Key: "k", ExpiresAt: time.Now().Add(time.Hour),
		}, []byte{byte(i)})
		return tok, err
	})
	for i, err := range errOut {
		if err != nil || toks[i].ID != toks[0].ID {
			t.Errorf("CreateSiteToken(key k) #%d = %s, %v; want %s", i, toks[i].ID, err, toks[0].ID)
		}
	}
}

func TestConsumeSiteToken(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	now := time.Now()
	mk := func(hash string, expires time.Time) store.SiteToken {
		t.Helper()
		tok, _, err := s.CreateSiteToken(ctx, store.SiteToken{TenantID: "a", SiteID: site.ID, ExpiresAt: expires}, []byte(hash))
		if err != nil {
			t.Fatalf("CreateSiteToken(%s) = %v", hash, err)
		}
		return tok
	}
	good := mk("good", now.Add(time.Hour))
	mk("expired", now.Add(-time.Second))

	used, err := s.ConsumeSiteToken(ctx, []byte("good"), now, spendSite)
	if err != nil {
		t.Fatalf("ConsumeSiteToken(good) = %v", err)
	}
	if used.ID != good.ID || used.SiteID != site.ID || used.TenantID != "a" || used.UsedAt == nil {
		t.Errorf("ConsumeSiteToken(good) = %+v, want token %s of site %s, marked used", used, good.ID, site.ID)
	}
	tests := []struct {
		hash, want string
	}{
		{"good", "already used"},
		{"expired", "expired"},
		{"unknown", "unknown site token"},
	}
	for _, tt := range tests {
		_, err := s.ConsumeSiteToken(ctx, []byte(tt.hash), now, spendSite)
		wantKind(t, "ConsumeSiteToken("+tt.hash+")", err, errs.Unauthenticated)
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ConsumeSiteToken(%s) = %v, want it to say %q", tt.hash, err, tt.want)
		}
	}
}

func TestConsumeSiteTokenConcurrently(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	if _, _, err := s.CreateSiteToken(t.Context(), store.SiteToken{TenantID: "a", SiteID: site.ID, ExpiresAt: time.Now().Add(time.Hour)}, []byte("once")); err != nil {
		t.Fatal(err)
	}
	_, errOut := concurrently(8, func(int) (store.SiteToken, error) {
		return s.ConsumeSiteToken(t.Context(), []byte("once"), time.Now(), spendSite)
	})
	ok := 0
	for i, err := range errOut {
		switch {
		case err == nil:
			ok++
		case !errs.Is(err, errs.Unauthenticated):
			t.Errorf("ConsumeSiteToken(once) #%d = %v, want nil or UNAUTHENTICATED", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("ConsumeSiteToken(once) succeeded %d times, want 1", ok)
	}
}
