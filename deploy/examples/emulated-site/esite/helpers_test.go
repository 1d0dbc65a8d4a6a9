package esite

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/qemu"
)

func TestPowerOnToJoin(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	boots := []qemu.Boot{
		{Device: bmc.BootPXE, Started: t0},                                                       // enroll's ramdisk
		{Device: bmc.BootPXE, Started: t0.Add(time.Minute)},                                      // a reboot into the ramdisk
		{Device: bmc.BootDisk, Started: t0.Add(2 * time.Minute), Ended: t0.Add(3 * time.Minute)}, // later
	}
	cases := []struct {
		joined time.Time
		want   time.Duration
	}{
		{time.Time{}, 0},                             // never joined
		{t0.Add(-time.Second), 0},                    // before any boot
		{t0.Add(15 * time.Second), 15 * time.Second}, // the first boot
		{t0.Add(80 * time.Second), 20 * time.Second}, // the boot that joined is the latest before it
	}
	for _, c := range cases {
		if got := powerOnToJoin(boots, c.joined); got != c.want {
			t.Errorf("powerOnToJoin(boots, %v) = %v, want %v", c.joined.Sub(t0), got, c.want)
		}
	}
}

func TestPatternDiskWipedShows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := writePatternDisk(p); err != nil {
		t.Fatal(err)
	}
	if zero, err := allZero(p); err != nil || zero {
		t.Fatalf("allZero(pattern disk) = %v, %v, want false", zero, err)
	}
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, diskBytes); err != nil { // all zeros again, as a wipe leaves it
		t.Fatal(err)
	}
	if zero, err := allZero(p); err != nil || !zero {
		t.Errorf("allZero(zeroed disk) = %v, %v, want true", zero, err)
	}
}

func TestMixedEndian(t *testing.T) {
	// What SeaBIOS's iPXE sent as option 97 for this product UUID.
	if got, want := mixedEndian("cbd07180-3e90-447f-8534-40076d13847b"), "8071d0cb-903e-7f44-8534-40076d13847b"; got != want {
		t.Errorf("mixedEndian = %s, want %s", got, want)
	}
	if got := mixedEndian("not-a-uuid"); got != "" {
		t.Errorf("mixedEndian(not-a-uuid) = %q, want \"\"", got)
	}
}
