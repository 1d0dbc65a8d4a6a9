package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
)

const (
	uuidA = "8f2c6a2e-1111-4000-8000-00000000000a"
	macA  = "52:54:00:00:00:0a"
	macB  = "52:54:00:00:00:0b"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// macLessNode returns a node of tenant "a" on site enrolled without MACs,
// the machine with product UUID uuid (one node per machine).
func macLessNode(t *testing.T, s *store.Store, site store.Site, uuid string) store.Node {
	t.Helper()
	p, err := s.CreatePool(t.Context(), store.Pool{TenantID: "a", SiteID: site.ID, Class: "metal-host", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	id := ids.New(ids.Node)
	n, err := s.CreateNode(t.Context(), store.Node{ID: id, TenantID: "a", SiteID: site.ID, PoolID: p.ID, ProductUUID: uuid,
		BMCAddress: "ipmi://bmc-" + id + ".test", BMCDriver: "ipmi", BMCCredentialsRef: "env://BMC"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func report(t *testing.T, s *store.Store, site string, ds ...store.Discovery) {
	t.Helper()
	if err := s.ReportDiscoveries(t.Context(), site, ds); err != nil {
		t.Fatalf("ReportDiscoveries(%+v) = %v", ds, err)
	}
}

func listDiscoveries(t *testing.T, s *store.Store, site string) []store.Discovery {
	t.Helper()
	list, err := s.ListDiscoveries(t.Context(), "a", site)
	if err != nil {
		t.Fatalf("ListDiscoveries(a, %s) = %v", site, err)
	}
	return list
}

// TestReportDiscoveriesMerges: a report merges with what is stored, so the
// same report twice (an agent that resends after a restart) or an older
// one changes nothing; a report of another tenant's site or of too many
// MACs is refused.
func TestReportDiscoveriesMerges(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	d := store.Discovery{MAC: macA, ClientUUID: uuidA, Arch: "EFI x86-64", FirstSeen: t0, LastSeen: t0.Add(time.Minute), Count: 3}
	report(t, s, site.ID, d)
	report(t, s, site.ID, d)
	older := store.Discovery{MAC: macA, FirstSeen: t0.Add(time.Second), LastSeen: t0.Add(2 * time.Second), Count: 1}
	report(t, s, site.ID, older)
	want := []store.Discovery{{TenantID: "a", SiteID: site.ID, MAC: macA, ClientUUID: uuidA, Arch: "EFI x86-64",
		FirstSeen: t0, LastSeen: t0.Add(time.Minute), Count: 3}}
	if diff := cmp.Diff(want, listDiscoveries(t, s, site.ID), cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("ListDiscoveries after the same report twice and an older one (-want +got):\n%s", diff)
	}
	newer := store.Discovery{MAC: macA, FirstSeen: t0.Add(time.Hour), LastSeen: t0.Add(2 * time.Hour), Count: 1, Arch: "x86 BIOS"}
	report(t, s, site.ID, newer)
	want[0].LastSeen, want[0].Arch = newer.LastSeen, "x86 BIOS"
	if diff := cmp.Diff(want, listDiscoveries(t, s, site.ID), cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("ListDiscoveries after a newer sighting without a UUID (-want +got):\n%s", diff)
	}
	if list, err := s.ListDiscoveries(ctx, "b", site.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("ListDiscoveries(tenant b, a's site) = %v, %v; want NOT_FOUND", list, err)
	}
	if err := s.ReportDiscoveries(ctx, "site_none", []store.Discovery{d}); !errs.Is(err, errs.NotFound) {
		t.Errorf("ReportDiscoveries(unknown site) = %v, want NOT_FOUND", err)
	}
	if err := s.ReportDiscoveries(ctx, site.ID, make([]store.Discovery, store.MaxDiscoveryReport+1)); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("ReportDiscoveries(%d MACs) = %v, want INVALID_INPUT", store.MaxDiscoveryReport+1, err)
	}
}

// TestFindCandidate: the candidate is a MAC heard of since the wait began
// under one of the UUID's forms, on the node's site, that no node has; a
// report that brings nothing new does not make an old sighting recent.
func TestFindCandidate(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	other, _, err := s.CreateSite(t.Context(), store.Site{TenantID: "a", Kind: "shared", Region: "lab-2"})
	if err != nil {
		t.Fatal(err)
	}
	n := macLessNode(t, s, site, uuidA)
	early := store.Discovery{MAC: macA, ClientUUID: uuidA, FirstSeen: t0, LastSeen: t0, Count: 1}
	report(t, s, site.ID, early)
	since, err := s.BeginMACWait(t.Context(), "a", n.ID)
	if err != nil {
		t.Fatalf("BeginMACWait = %v", err)
	}
	find := func(uuids ...string) string {
		t.Helper()
		d, ok, err := s.FindCandidate(t.Context(), "a", site.ID, uuids, since)
		if err != nil {
			t.Fatalf("FindCandidate(%v) = %v", uuids, err)
		}
		if !ok {
			return ""
		}
		return d.MAC
	}
	report(t, s, site.ID, early)                                                                                 // resent: nothing new
	report(t, s, other.ID, store.Discovery{MAC: macB, ClientUUID: uuidA, FirstSeen: t0, LastSeen: t0, Count: 1}) // another site
	if got := find(uuidA); got != "" {
		t.Errorf("FindCandidate before any new sighting = %s, want none", got)
	}
	report(t, s, site.ID, store.Discovery{MAC: macA, ClientUUID: uuidA, FirstSeen: t0, LastSeen: t0.Add(time.Minute), Count: 2})
	if got := find("2e6a2c8f-1111-0040-8000-00000000000a", uuidA); got != macA {
		t.Errorf("FindCandidate after a new sighting = %q, want %s", got, macA)
	}
	if got := find("2e6a2c8f-1111-0040-8000-00000000000a"); got != "" {
		t.Errorf("FindCandidate(another UUID) = %s, want none", got)
	}
	// A MAC that a node has is nobody's candidate.
	claimer := macLessNode(t, s, site, "8f2c6a2e-1111-4000-8000-00000000000c")
	if _, err := s.BeginMACWait(t.Context(), "a", claimer.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmMAC(t.Context(), "a", claimer.ID, macA, store.WaitPXEDiscovery); err != nil {
		t.Fatalf("ConfirmMAC(claimer) = %v", err)
	}
	if got := find(uuidA); got != "" {
		t.Errorf("FindCandidate of a MAC another node has = %s, want none", got)
	}
}
