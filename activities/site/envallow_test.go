package site

import (
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/kinds"
)

// TestEnvAllowList: env:// reads a variable of the agent only with the
// BCD_SECRET_ prefix or named by AllowEnv; any other (PATH, the agent's own
// tokens) is INVALID_INPUT even when set and holding username:password,
// whatever the API let through.
func TestEnvAllowList(t *testing.T) {
	b := startBMC(t)
	vars := map[string]string{"PATH": "admin:s3cret", "LEGACY_BMC": "admin:s3cret", "BCD_SECRET_BMC": "admin:s3cret", "BCD_SECRET_": "admin:s3cret"}
	a := &Activities{
		Drivers:   map[string]DriverFactory{bmc.DriverRedfish: redfishFactory},
		LookupEnv: envLookup(vars),
		AllowEnv:  []string{"LEGACY_BMC"},
	}
	env := testEnv(t, a)
	for _, tc := range []struct {
		ref, wantKind string // "" is success
	}{
		{"env://BCD_SECRET_BMC", ""},
		{"env://LEGACY_BMC", ""},
		{"env://PATH", "INVALID_INPUT"},
		{"env://BCD_SECRET_", "INVALID_INPUT"},
		{"env://BCD_SECRET_BMC=x", "INVALID_INPUT"},
	} {
		target := kinds.BMCTarget{NodeID: "node_1", Address: b.SystemURL(), Driver: "redfish", CredentialsRef: tc.ref}
		_, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn})
		got := ""
		if err != nil {
			got, _ = appError(t, err)
		}
		if got != tc.wantKind {
			t.Errorf("power.setPower(%s) = %q (%v), want %q", tc.ref, got, err, tc.wantKind)
		}
	}
}
