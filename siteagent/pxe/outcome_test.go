package pxe

import (
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/better-compute/better-compute/siteagent/boot"
)

// TestDecisionOutcome: the metrics' outcome of each kind of decision.
func TestDecisionOutcome(t *testing.T) {
	for _, tc := range []struct {
		d    decision
		want string
	}{
		{decision{reply: &dhcpv4.DHCPv4{}}, "answered"},
		{decision{why: "not PXE"}, "ignored"},
		{decision{discovered: &boot.Discovery{MAC: "52:54:00:00:00:01"}}, "discovered"},
	} {
		if got := tc.d.outcome(); got != tc.want {
			t.Errorf("decision{%+v}.outcome() = %q, want %q", tc.d, got, tc.want)
		}
	}
}
