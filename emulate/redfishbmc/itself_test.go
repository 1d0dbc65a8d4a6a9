package redfishbmc

import (
	"testing"

	"github.com/better-compute/better-compute/bmc"
)

// TestMachineItself checks what the machine reports of itself: a reboot
// boots it again and uses up a Once override; a power-off turns it off; and
// neither acts on a boot that is no longer the latest, nor on a machine
// that is off.
func TestMachineItself(t *testing.T) {
	t.Parallel()
	b := unserved(t)
	if b.Rebooted(0) || b.PoweredOff(0) {
		t.Fatalf("Rebooted(0) or PoweredOff(0) on a machine that is off = true, want false")
	}
	if p := b.patchBoot(map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}); p != "" {
		t.Fatal(p)
	}
	if p := b.reset("On"); p != "" {
		t.Fatal(p)
	}
	if st := b.State(); st.Boots != 1 || st.LastBootDevice != bmc.BootPXE {
		t.Fatalf("after On: boots %d from %q, want 1 from pxe", st.Boots, st.LastBootDevice)
	}
	if !b.Rebooted(1) {
		t.Fatalf("Rebooted(1) = false, want true")
	}
	if st := b.State(); st.Boots != 2 || st.LastBootDevice != bmc.BootDisk || st.BootEnabled != "Disabled" {
		t.Errorf("after Rebooted(1): boots %d from %q, override %s; want 2 from disk, Disabled", st.Boots, st.LastBootDevice, st.BootEnabled)
	}
	if b.Rebooted(1) || b.PoweredOff(1) {
		t.Errorf("Rebooted(1) or PoweredOff(1) after boot 2 began = true, want false")
	}
	if !b.PoweredOff(2) || b.State().Power != bmc.Off {
		t.Errorf("PoweredOff(2) = false or the machine is on, want it off")
	}
	if calls := b.State().Calls; len(calls) != 2 {
		t.Errorf("Calls = %v, want only the two Redfish requests", calls)
	}
}

// unserved is an emulated BMC that is not served: the test calls its methods.
func unserved(t *testing.T) *BMC {
	t.Helper()
	b, err := New(Config{Username: testUser, Password: testPass, UUID: testUUID, MACs: testMACs()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
