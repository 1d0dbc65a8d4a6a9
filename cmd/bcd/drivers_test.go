package main

import (
	"bytes"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/activities/site"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/kinds"
)

// TestDriversReachIPMI: with bcd site's registry, power.setPower for a
// node enrolled with --bmc-driver ipmi reaches a real IPMI BMC (ipmi_sim)
// and powers the machine on, instead of failing UNSUPPORTED.
func TestDriversReachIPMI(t *testing.T) {
	s := ipmisim.Start(t, ipmisim.Config{})
	a := &site.Activities{Drivers: drivers(slog.New(slog.DiscardHandler)), LookupEnv: func(k string) (string, bool) {
		return ipmisim.User + ":" + ipmisim.Password, k == "BCD_SECRET_BMC"
	}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	if err := a.Register(env, nil); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{s.Address(), "127.0.0.1:" + strconv.Itoa(s.Port())} { // with and without the scheme
		target := kinds.BMCTarget{NodeID: "node_1", Address: addr, Driver: bmc.DriverIPMI, CredentialsRef: "env://BCD_SECRET_BMC"}
		v, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn})
		if err != nil {
			t.Fatalf("power.setPower(on) at %s = %v", addr, err)
		}
		var out kinds.SetPowerOutput
		if err := v.Get(&out); err != nil || out.PowerState != bmc.On {
			t.Errorf("power.setPower(on) at %s = %+v, %v, want on", addr, out, err)
		}
	}
	if got := s.Read(t, "power"); got != "1" {
		t.Errorf("machine power = %s, want 1", got)
	}
	if got := s.Lines(t, "log"); len(got) != 1 || got[0] != "power 1" {
		t.Errorf("chassis_control sets = %q, want one power 1 (the second on found it on)", got)
	}
}

// TestDriversLog: bcd site's drivers log through the agent's logger (what
// the BMC was asked and answered), and never the password. Before, they got
// no logger and their lines were lost.
func TestDriversLog(t *testing.T) {
	b, err := redfishbmc.New(redfishbmc.Config{Username: "admin", Password: "drivers-log-pw"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.Start(ln)
	t.Cleanup(func() { b.Close() })
	var out bytes.Buffer
	a := &site.Activities{Drivers: drivers(slog.New(slog.NewTextHandler(&out, nil))), LookupEnv: func(k string) (string, bool) {
		return "admin:drivers-log-pw", k == "BCD_SECRET_BMC"
	}}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	if err := a.Register(env, nil); err != nil {
		t.Fatal(err)
	}
	target := kinds.BMCTarget{NodeID: "node_1", Address: b.SystemURL(), Driver: bmc.DriverRedfish, CredentialsRef: "env://BCD_SECRET_BMC"}
	if _, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn}); err != nil {
		t.Fatalf("power.setPower(on) = %v", err)
	}
	if log := out.String(); !strings.Contains(log, "redfish power confirmed") || strings.Contains(log, "drivers-log-pw") {
		t.Errorf("agent log after a power action = %q, want the driver's lines and no password", log)
	}
}
