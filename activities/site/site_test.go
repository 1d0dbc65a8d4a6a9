package site

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

var testMACs = []string{"52:54:00:aa:00:01", "52:54:00:aa:00:02"}

// startBMC runs an emulated Redfish BMC (admin/s3cret) until the test ends.
func startBMC(t *testing.T) *redfishbmc.BMC {
	t.Helper()
	b, err := redfishbmc.New(redfishbmc.Config{Username: "admin", Password: "s3cret", MACs: testMACs})
	if err != nil {
		t.Fatalf("redfishbmc.New() = %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.Start(ln)
	t.Cleanup(func() { b.Close() })
	return b
}

func redfishFactory(_ context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
	return redfish.New(redfish.Config{Address: addr, Credentials: creds})
}

func testEnv(t *testing.T, a *Activities) *testsuite.TestActivityEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	if err := a.Register(env, nil); err != nil {
		t.Fatal(err)
	}
	return env
}

func envLookup(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
}

// appError returns err's Temporal application error type and retryability.
func appError(t *testing.T, err error) (string, bool) {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an application error", err)
	}
	return ae.Type(), ae.NonRetryable()
}

func TestBMCActivitiesAgainstEmulatedBMC(t *testing.T) {
	b := startBMC(t)
	a := &Activities{
		Drivers:   map[string]DriverFactory{bmc.DriverRedfish: redfishFactory},
		LookupEnv: envLookup(map[string]string{"BCD_SECRET_BMC_CREDS": "admin:s3cret"}),
	}
	env := testEnv(t, a)
	target := kinds.BMCTarget{NodeID: "node_1", Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "env://BCD_SECRET_BMC_CREDS"}

	v, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn})
	if err != nil {
		t.Fatalf("power.setPower(on) = %v", err)
	}
	var pout kinds.SetPowerOutput
	if err := v.Get(&pout); err != nil || pout.PowerState != bmc.On {
		t.Errorf("power.setPower(on) = %+v, %v, want state on", pout, err)
	}
	if got := b.State().Power; got != bmc.On {
		t.Errorf("BMC power after on = %s, want on", got)
	}

	if _, err := env.ExecuteActivity(kinds.ManagementSetBootDevice, kinds.SetBootDeviceInput{BMC: target, Device: bmc.BootPXE}); err != nil {
		t.Fatalf("management.setBootDevice(pxe) = %v", err)
	}
	if st := b.State(); st.BootTarget != "Pxe" || st.BootEnabled != "Once" {
		t.Errorf("BMC boot override = %s/%s, want Pxe/Once", st.BootTarget, st.BootEnabled)
	}

	v, err = env.ExecuteActivity(kinds.BMCInspect, kinds.InspectInput{BMC: target})
	if err != nil {
		t.Fatalf("bmc.inspect = %v", err)
	}
	var iout kinds.InspectOutput
	if err := v.Get(&iout); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(testMACs, iout.Inventory.MACs); diff != "" {
		t.Errorf("bmc.inspect MACs (-want +got):\n%s", diff)
	}
}

func TestBMCActivityFailures(t *testing.T) {
	b := startBMC(t)
	a := &Activities{
		Drivers:   map[string]DriverFactory{bmc.DriverRedfish: redfishFactory},
		LookupEnv: envLookup(map[string]string{"BCD_SECRET_GOOD": "admin:s3cret", "BCD_SECRET_NOCOLON": "admin", "BCD_SECRET_WRONG": "admin:not-it"}),
	}
	env := testEnv(t, a)
	tests := []struct {
		name        string
		target      kinds.BMCTarget
		wantKind    errs.Kind
		wantNoRetry bool
	}{
		{"ipmi driver absent", kinds.BMCTarget{Address: "ipmi://10.0.0.1", CredentialsRef: "env://BCD_SECRET_GOOD"}, errs.Unsupported, true},
		{"env var unset", kinds.BMCTarget{Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "env://BCD_SECRET_MISSING"}, errs.NotFound, true},
		{"env var without colon", kinds.BMCTarget{Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "env://BCD_SECRET_NOCOLON"}, errs.InvalidInput, true},
		{"vault", kinds.BMCTarget{Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "vault://kv/bmc"}, errs.Unsupported, true},
		{"secret without service", kinds.BMCTarget{Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "secret://bmc/1"}, errs.Unsupported, true},
		{"bare ref", kinds.BMCTarget{Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "admin:s3cret"}, errs.InvalidInput, true},
		{"bad address", kinds.BMCTarget{Address: "ftp://x", CredentialsRef: "env://BCD_SECRET_GOOD"}, errs.InvalidInput, true},
		// final, so Temporal does not retry a wrong password into a locked BMC account
		{"wrong password", kinds.BMCTarget{Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "env://BCD_SECRET_WRONG"}, errs.Unauthenticated, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: tt.target, Action: bmc.PowerOn})
			typ, noRetry := appError(t, err)
			if typ != string(tt.wantKind) || noRetry != tt.wantNoRetry {
				t.Errorf("power.setPower(%s) = %s (non-retryable %v), want %s (%v)", tt.name, typ, noRetry, tt.wantKind, tt.wantNoRetry)
			}
		})
	}
	if got := b.State().Power; got != bmc.Off {
		t.Errorf("BMC power after refused commands = %s, want off", got)
	}
}

// TestSetPowerRecordsConfirmation: power.setPower returns once a BMC that
// lands changes late reports the new state, and its result says how long
// that took.
func TestSetPowerRecordsConfirmation(t *testing.T) {
	const delay = 400 * time.Millisecond
	b, err := redfishbmc.New(redfishbmc.Config{Username: "admin", Password: "s3cret", PowerDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.Start(ln)
	t.Cleanup(func() { b.Close() })
	a := &Activities{
		Drivers:   map[string]DriverFactory{bmc.DriverRedfish: redfishFactory},
		LookupEnv: envLookup(map[string]string{"BCD_SECRET_BMC_CREDS": "admin:s3cret"}),
	}
	env := testEnv(t, a)
	target := kinds.BMCTarget{NodeID: "node_1", Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "env://BCD_SECRET_BMC_CREDS"}
	v, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn})
	if err != nil {
		t.Fatalf("power.setPower(on) = %v", err)
	}
	var out kinds.SetPowerOutput
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.PowerState != bmc.On || out.ConfirmedMs < delay.Milliseconds() || out.PowerReads < 2 {
		t.Errorf("power.setPower(on) = %+v, want on, confirmed after ≥ %dms and ≥ 2 reads", out, delay.Milliseconds())
	}
	if got := b.State().Power; got != bmc.On {
		t.Errorf("BMC power when power.setPower(on) returned = %s, want on", got)
	}
}

func TestToTemporal(t *testing.T) {
	tests := []struct {
		err         error
		wantType    string
		wantNoRetry bool
	}{
		{errs.New(errs.DriverError, "bmc said 500"), "DRIVER_ERROR", false},
		{errs.New(errs.Unavailable, "down"), "UNAVAILABLE", false},
		{errs.New(errs.InvalidInput, "bad"), "INVALID_INPUT", true},
		{errs.New(errs.UnverifiedWipe, "no"), "UNVERIFIED_WIPE", true},
		{errors.New("plain"), "INTERNAL", false},
	}
	for _, tt := range tests {
		err := toTemporal(tt.err)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != tt.wantType || ae.NonRetryable() != tt.wantNoRetry {
			t.Errorf("toTemporal(%v) = %v, want type %s non-retryable %v", tt.err, err, tt.wantType, tt.wantNoRetry)
		}
	}
	if toTemporal(nil) != nil || !errors.Is(toTemporal(context.Canceled), context.Canceled) {
		t.Errorf("toTemporal(nil / context.Canceled) changed its argument")
	}
}
