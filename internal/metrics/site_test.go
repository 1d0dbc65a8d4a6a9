package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

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

// TestSiteBMCAndImages: BMC calls per driver, call and outcome with their
// durations, the breakers per state and the bytes deploy.image wrote come
// out of the site's /metrics; a nil Site counts none of them.
func TestSiteBMCAndImages(t *testing.T) {
	var none *Site
	none.BMCCall("redfish", "power.setPower", "ok", time.Second)
	none.ImageWrote(1)

	m := NewSite()
	m.BMCCall("redfish", "power.setPower", "ok", 2*time.Second)
	m.BMCCall("redfish", "power.setPower", "DRIVER_ERROR", time.Second)
	m.BMCCall("ipmi", "bmc.inspect", "ok", 100*time.Millisecond)
	m.ImageWrote(4096)
	m.ImageWrote(1 << 20)
	m.Temporal().Counter("temporal_request").Inc(1)
	m.CountBreakers(func() map[string]int { return map[string]int{"closed": 3, "open": 1} })

	fams := scrape(t, m.Handler())
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"better_compute_bmc_calls_total", map[string]string{"driver": "redfish", "call": "power.setPower", "outcome": "ok"}, 1},
		{"better_compute_bmc_calls_total", map[string]string{"driver": "redfish", "call": "power.setPower", "outcome": "DRIVER_ERROR"}, 1},
		{"better_compute_bmc_calls_total", map[string]string{"driver": "ipmi", "call": "bmc.inspect", "outcome": "ok"}, 1},
		{"better_compute_image_written_bytes_total", map[string]string{}, 4096 + 1<<20},
		{"temporal_request_total", map[string]string{}, 1},
		{"better_compute_bmc_breakers", map[string]string{"state": "closed"}, 3},
		{"better_compute_bmc_breakers", map[string]string{"state": "open"}, 1},
	}
	for _, tt := range tests {
		if got := value(fams, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	if got := histograms(fams, "better_compute_bmc_call_duration_seconds", "driver"); !cmp.Equal(got, map[string]sampled{
		"redfish": {2, 3}, "ipmi": {1, 0.1}}) {
		t.Errorf("better_compute_bmc_call_duration_seconds = %v, want redfish 2 summing to 3s, ipmi 1 of 0.1s", got)
	}
}
