package boot

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDiscoveredKeepsPXEFields: a proxy-DHCP discovery carries the
// client's UUID and architecture, a later /ipxe fetch does not erase them,
// and a reopened table still has them.
func TestDiscoveredKeepsPXEFields(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boot.json")
	tab, _ := Open(path, nil)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	tab.now = func() time.Time { return now }
	const mac = "52:54:00:aa:00:09"
	for _, d := range []Discovery{
		{MAC: mac, ClientUUID: "11223344-5566-7788-99aa-bbccddeeff01", Arch: "EFI x86-64"},
		{MAC: mac}, // the same machine fetching /ipxe
	} {
		if err := tab.Discovered(d); err != nil {
			t.Fatalf("Discovered(%+v) = %v", d, err)
		}
		now = now.Add(time.Minute)
	}
	re, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Discovery{{MAC: mac, FirstSeen: t0, LastSeen: t0.Add(time.Minute), Count: 2,
		ClientUUID: "11223344-5566-7788-99aa-bbccddeeff01", Arch: "EFI x86-64"}}
	if diff := cmp.Diff(want, re.Discoveries()); diff != "" {
		t.Errorf("Discoveries() after reopen differ (-want +got):\n%s", diff)
	}
}

// TestDiscoveriesBounded: past MaxDiscoveries a new MAC replaces the one
// seen longest ago.
func TestDiscoveriesBounded(t *testing.T) {
	t.Parallel()
	tab, _ := Open(filepath.Join(t.TempDir(), "boot.json"), nil)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tab.now = func() time.Time { now = now.Add(time.Second); return now }
	mac := func(i int) string { return fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff) }
	for i := range MaxDiscoveries + 2 {
		if err := tab.Discovered(Discovery{MAC: mac(i)}); err != nil {
			t.Fatal(err)
		}
	}
	ds := tab.Discoveries()
	seen := map[string]bool{}
	for _, d := range ds {
		seen[d.MAC] = true
	}
	if len(ds) != MaxDiscoveries || seen[mac(0)] || seen[mac(1)] || !seen[mac(2)] || !seen[mac(MaxDiscoveries+1)] {
		t.Errorf("after %d MACs: %d discoveries, first two kept %v %v, want %d without the two oldest",
			MaxDiscoveries+2, len(ds), seen[mac(0)], seen[mac(1)], MaxDiscoveries)
	}
}
