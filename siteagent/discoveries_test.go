package siteagent

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// sightings returns every report of mac the control plane received, as
// "uuid/count", in order.
func sightings(cp *fakecp.CP, mac string) []string {
	var out []string
	for _, r := range cp.Discoveries.Reports() {
		for _, it := range r {
			if it.Mac == mac {
				out = append(out, fmt.Sprintf("%s/%d", it.ClientUuid, it.Count))
			}
		}
	}
	return out
}

// waitReports waits until the control plane received n reports of mac and
// returns them.
func waitReports(t *testing.T, cp *fakecp.CP, mac string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := sightings(cp, mac)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReportsDiscoveries: an unknown MAC fetching its script reaches the
// control plane with its UUID; a sighting while the control plane refuses
// is retried until it is taken; a restarted agent sends its persisted
// table once more, whole, so the control plane can merge it as a no-op.
func TestReportsDiscoveries(t *testing.T) {
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	a := startAgent(t, cfg)
	const mac, uuid = "52:54:00:aa:00:0c", "8f2c6a2e-0000-4000-8000-0000000000aa"
	fetch := func(a *Agent) {
		t.Helper()
		if status, _ := call(t, http.DefaultClient, http.MethodGet, a.BootURL()+"/ipxe?mac=52-54-00-AA-00-0C&uuid="+uuid, nil); status != 200 {
			t.Fatalf("GET /ipxe = %d, want 200", status)
		}
	}
	fetch(a)
	if got := waitReports(t, cp, mac, 1); len(got) != 1 || got[0] != uuid+"/1" {
		t.Fatalf("reports of %s after one sighting = %v, want [%s/1]", mac, got, uuid)
	}
	cp.Discoveries.Refuse.Store(true)
	fetch(a)
	time.Sleep(1500 * time.Millisecond) // a report and a retry, both refused
	if got := sightings(cp, mac); len(got) != 1 {
		t.Fatalf("reports taken while the control plane refuses = %v, want the first only", got)
	}
	cp.Discoveries.Refuse.Store(false)
	if got := waitReports(t, cp, mac, 2); len(got) != 2 || got[1] != uuid+"/2" {
		t.Fatalf("reports of %s once the control plane is back = %v, want the second sighting retried", mac, got)
	}
	a.Stop()
	time.Sleep(200 * time.Millisecond)
	if got := sightings(cp, mac); len(got) != 2 {
		t.Errorf("reports after acknowledgement = %v, want no resend by the running agent", got)
	}
	startAgent(t, cfg) // from its data dir: the boot table persisted
	if got := waitReports(t, cp, mac, 3); len(got) != 3 || got[2] != uuid+"/2" {
		t.Errorf("reports after a restart = %v, want the whole record sent once more", got)
	}
}
