package siteagent

import (
	"slices"
	"testing"
	"time"

	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// TestAnnouncesBMCDrivers: a started site agent tells the control plane
// which BMC drivers it has, so enroll can refuse a node it cannot drive.
func TestAnnouncesBMCDrivers(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.Drivers = map[string]DriverFactory{"redfish": nil, "ipmi": nil}
	startAgent(t, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for cp.Announced() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := cp.Announced(); !slices.Equal(got, []string{"ipmi", "redfish"}) {
		t.Errorf("announced BMC drivers = %v, want [ipmi redfish]", got)
	}
}
