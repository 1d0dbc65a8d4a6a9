package pid1

import (
	"strings"
	"testing"
)

// FuzzBootMAC: any command line either yields no MAC, an error, or a MAC
// that BOOTIF written back from it yields again.
func FuzzBootMAC(f *testing.F) {
	for _, s := range []string{"BOOTIF=01-52-54-00-12-34-56", "BOOTIF=", "BOOTIF=01-", "BOOTIF=01-${netX/mac:hexhyp}",
		"BOOTIF=01-aa-bb-cc-dd-ee-ff BOOTIF=01-aa-bb-cc-dd-ee-ff", "x BOOTIF=01-AA:BB:CC:DD:EE:FF y", "BOOTIF=01-0000.0000.0000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mac, err := BootMAC(s)
		if err != nil || mac == nil {
			return
		}
		again, err := BootMAC("BOOTIF=01-" + strings.ReplaceAll(mac.String(), ":", "-"))
		if err != nil || again.String() != mac.String() {
			t.Fatalf("BootMAC(%q) = %v, but BOOTIF written from it gives %v, %v", s, mac, again, err)
		}
	})
}
