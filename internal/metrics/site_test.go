package metrics

import "testing"

// TestSiteScrape: what a site agent counted comes out of its /metrics with
// those values; a nil Site counts nothing and does not panic.
func TestSiteScrape(t *testing.T) {
	var none *Site
	none.PXERequest("answered")
	none.Milestone("armed")
	none.CacheLookup(true, 0)
	none.RelayedCommand("disk.wipe", "succeeded")

	m := NewSite()
	m.PXERequest("answered")
	m.PXERequest("answered")
	m.PXERequest("discovered")
	m.Milestone("armed")
	m.Milestone("joined")
	m.CacheLookup(false, 1000)
	m.CacheLookup(true, 0)
	m.CacheLookup(true, 0)
	m.RelayedCommand("disk.wipe", "succeeded")
	m.RelayedCommand("inventory.refresh", "stalled")

	fams := scrape(t, m.Handler())
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"better_compute_pxe_requests_total", map[string]string{"outcome": "answered"}, 2},
		{"better_compute_pxe_requests_total", map[string]string{"outcome": "discovered"}, 1},
		{"better_compute_boot_milestones_total", map[string]string{"milestone": "joined"}, 1},
		{"better_compute_image_cache_lookups_total", map[string]string{"result": "hit"}, 2},
		{"better_compute_image_cache_lookups_total", map[string]string{"result": "miss"}, 1},
		{"better_compute_image_cache_fetched_bytes_total", map[string]string{}, 1000},
		{"better_compute_relayed_commands_total", map[string]string{"kind": "disk.wipe", "outcome": "succeeded"}, 1},
		{"better_compute_relayed_commands_total", map[string]string{"kind": "inventory.refresh", "outcome": "stalled"}, 1},
	}
	for _, tt := range tests {
		if got := value(fams, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
}
