package redfishbmc

import (
	"context"
	"testing"
)

// TestDriverInspectHiddenNICs: a BMC told to hide its NICs (as IPMI cannot
// tell MACs) gives the Redfish driver the machine's UUID and no MAC, over
// our own tree and over the DMTF mockup (whose own NICs go too).
func TestDriverInspectHiddenNICs(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		b := start(t, Config{MockupDir: mockup, HideNICs: true})
		inv, err := driver(t, b, testUser, testPass, false).Inspect(context.Background())
		if err != nil {
			t.Fatalf("Inspect() = %v", err)
		}
		if len(inv.MACs) != 0 || inv.ProductUUID != testUUID {
			t.Errorf("Inspect() = MACs %v, UUID %q; want no MAC and %s", inv.MACs, inv.ProductUUID, testUUID)
		}
	})
}
