package boot

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// clockTable is a table whose clock the test moves.
func clockTable(t *testing.T) (*Table, *time.Time) {
	t.Helper()
	tb, err := Open(filepath.Join(t.TempDir(), "boot.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tb.now = func() time.Time { return now }
	return tb, &now
}

func names(ms []Milestone) string {
	var out []string
	for _, m := range ms {
		out = append(out, strings.TrimSpace(m.Name+" "+m.Detail))
	}
	return strings.Join(out, ", ")
}

// TestTrailFollowsABoot: each milestone a ramdisk boot reaches is recorded
// once, in order; a boot that shows nothing new for longer than the bound
// stalls naming the milestone it stopped at and what to check; a joined
// ramdisk never stalls; a local-boot entry is not followed.
func TestTrailFollowsABoot(t *testing.T) {
	tb, now := clockTable(t)
	const after = time.Minute
	if err := tb.SetEntry(kinds.BootEntry{NodeID: "node_a", MACs: []string{"52:54:00:00:00:01"}, Ramdisk: true,
		DiscoveryToken: "bcdisc_x"}); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(after)
	if err := tb.Stalled("node_a", after); err != nil {
		t.Errorf("Stalled(after exactly the bound) = %v, want nil", err)
	}
	*now = now.Add(time.Second)
	err := tb.Stalled("node_a", after)
	if !errs.Is(err, errs.BootStalled) || !strings.Contains(err.Error(), `stopped at "armed"`) ||
		!strings.Contains(err.Error(), "boot order") || !strings.Contains(err.Error(), "52:54:00:00:00:01") {
		t.Errorf("Stalled(armed, quiet) = %v, want BOOT_STALLED at armed naming the boot order and the MAC", err)
	}

	tb.MarkMAC("52:54:00:00:00:01", MilestoneDHCP, "OFFER on port 67: undionly.kpxe")
	tb.MarkMAC("52:54:00:00:00:99", MilestoneDHCP, "not ours")
	srv := httptest.NewServer(tb.Handler(Params{BootURL: "http://boot", RelayURL: "https://relay", CAFingerprint: "ab"}, t.TempDir()))
	defer srv.Close()
	for _, path := range []string{"/ipxe?mac=52:54:00:00:00:01", "/ipxe?mac=52:54:00:00:00:01", "/ramdisk/node_a/" + Kernel} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got, want := names(tb.Trail("node_a")), "armed, dhcp OFFER on port 67: undionly.kpxe, script, kernel HTTP 404"; got != want {
		t.Errorf("Trail = %s, want %s", got, want)
	}
	err = tb.Stalled("node_a", after)
	if !errs.Is(err, errs.BootStalled) || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "--ramdisk-dir") {
		t.Errorf("Stalled(kernel refused) = %v, want BOOT_STALLED at once naming the 404 and --ramdisk-dir", err)
	}

	tb.Mark("node_a", MilestoneJoined, "")
	*now = now.Add(time.Hour)
	if err := tb.Stalled("node_a", after); err != nil {
		t.Errorf("Stalled(joined, an hour later) = %v, want nil", err)
	}

	if err := tb.SetEntry(kinds.BootEntry{NodeID: "node_a", MACs: []string{"52:54:00:00:00:01"}}); err != nil {
		t.Fatal(err)
	}
	tb.Mark("node_a", MilestoneScript, "")
	if got := tb.Trail("node_a"); got != nil {
		t.Errorf("Trail(local-boot entry) = %s, want none", names(got))
	}
}

// TestTrailKernelServed: a kernel fetched whole is a milestone, not a stall.
func TestTrailKernelServed(t *testing.T) {
	tb, now := clockTable(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, Kernel), []byte("kernel bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tb.SetEntry(kinds.BootEntry{NodeID: "node_b", MACs: []string{"52:54:00:00:00:02"}, Ramdisk: true,
		DiscoveryToken: "bcdisc_y"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tb.Handler(Params{BootURL: "http://boot"}, dir))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/ramdisk/node_b/" + Kernel)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	*now = now.Add(30 * time.Second)
	if got := names(tb.Trail("node_b")); got != "armed, kernel HTTP 200" || tb.Stalled("node_b", time.Minute) != nil {
		t.Errorf("Trail = %s, Stalled = %v; want armed, kernel HTTP 200 and no stall yet", got, tb.Stalled("node_b", time.Minute))
	}
	*now = now.Add(time.Minute)
	if err := tb.Stalled("node_b", time.Minute); !errs.Is(err, errs.BootStalled) || !strings.Contains(err.Error(), "initramfs") {
		t.Errorf("Stalled(kernel only, quiet) = %v, want BOOT_STALLED naming the initramfs", err)
	}
}
