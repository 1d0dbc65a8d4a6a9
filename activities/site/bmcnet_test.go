package site

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/kinds"
)

// TestBMCNetworks: with bcd site --bmc-network set, a BMC address outside
// every network (an IP, or a name resolving there) fails PERMISSION_DENIED,
// final, naming the address and the flag, before its credentials are read
// or its driver opened; an address inside works; no networks allows all.
func TestBMCNetworks(t *testing.T) {
	b := startBMC(t)
	host := strings.TrimPrefix(b.SystemURL(), "http://") // 127.0.0.1:port/redfish/…
	for _, tc := range []struct {
		name, address string
		networks      []string
		wantKind      string // "" is success
	}{
		{"no networks", b.SystemURL(), nil, ""},
		{"inside", b.SystemURL(), []string{"10.0.0.0/8", "127.0.0.0/8"}, ""},
		{"outside", b.SystemURL(), []string{"10.0.0.0/8"}, "PERMISSION_DENIED"},
		{"name outside", "http://localhost:" + strings.SplitN(strings.Split(host, "/")[0], ":", 2)[1] + "/redfish/v1/Systems/1",
			[]string{"10.0.0.0/8"}, "PERMISSION_DENIED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nets, err := ParseBMCNetworks(tc.networks)
			if err != nil {
				t.Fatal(err)
			}
			lookups, opens := 0, 0
			a := &Activities{
				Drivers: map[string]DriverFactory{bmc.DriverRedfish: func(ctx context.Context, addr bmc.Address, c bmc.Credentials) (bmc.Driver, error) {
					opens++
					return redfishFactory(ctx, addr, c)
				}},
				LookupEnv: func(k string) (string, bool) {
					lookups++
					return envLookup(map[string]string{"BCD_SECRET_BMC": "admin:s3cret"})(k)
				},
				BMCNetworks: nets,
			}
			target := kinds.BMCTarget{NodeID: "node_1", Address: tc.address, Driver: "redfish", CredentialsRef: "env://BCD_SECRET_BMC"}
			_, err = testEnv(t, a).ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn})
			if tc.wantKind == "" {
				if err != nil {
					t.Fatalf("power.setPower(%s) = %v, want success", tc.address, err)
				}
				return
			}
			kind, final := appError(t, err)
			if kind != tc.wantKind || !final {
				t.Errorf("power.setPower(%s) = %s final %v, want %s final", tc.address, kind, final, tc.wantKind)
			}
			if !strings.Contains(err.Error(), "--bmc-network") || !strings.Contains(err.Error(), "10.0.0.0/8") {
				t.Errorf("error %q does not name the networks and the flag", err)
			}
			if lookups != 0 || opens != 0 {
				t.Errorf("credentials read %d times, driver opened %d times, want 0 and 0", lookups, opens)
			}
		})
	}
}

// TestParseBMCNetworks: a bad CIDR is INVALID_INPUT naming it; hosts bits
// are masked.
func TestParseBMCNetworks(t *testing.T) {
	got, err := ParseBMCNetworks([]string{"10.20.1.7/16"})
	if err != nil || len(got) != 1 || got[0] != netip.MustParsePrefix("10.20.0.0/16") {
		t.Errorf("ParseBMCNetworks(10.20.1.7/16) = %v, %v, want [10.20.0.0/16]", got, err)
	}
	if _, err := ParseBMCNetworks([]string{"10.20.0.0"}); err == nil || !strings.Contains(err.Error(), "10.20.0.0") {
		t.Errorf("ParseBMCNetworks(10.20.0.0) = %v, want INVALID_INPUT naming it", err)
	}
}
