package redfish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/google/go-cmp/cmp"
	"github.com/stmcginnis/gofish/common"
	rf "github.com/stmcginnis/gofish/redfish"
)

func TestPlanReset(t *testing.T) {
	t.Parallel()
	all := []rf.ResetType(nil) // none listed: everything allowed
	dmtf := []rf.ResetType{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn", "PushPowerButton"}
	tests := []struct {
		action  bmc.PowerAction
		on      bool
		allowed []rf.ResetType
		want    []rf.ResetType
		kind    errs.Kind
	}{
		{bmc.PowerOn, false, all, []rf.ResetType{"On"}, ""},
		{bmc.PowerOn, true, all, nil, ""},
		{bmc.PowerOn, false, []rf.ResetType{"ForceOn", "ForceOff"}, []rf.ResetType{"ForceOn"}, ""},
		{bmc.PowerOff, true, all, []rf.ResetType{"ForceOff"}, ""},
		{bmc.PowerOff, false, all, nil, ""},
		{bmc.PowerGracefulOff, true, all, []rf.ResetType{"GracefulShutdown"}, ""},
		{bmc.PowerGracefulOff, false, []rf.ResetType{"On"}, nil, ""},
		{bmc.PowerGracefulOff, true, []rf.ResetType{"On", "ForceOff"}, nil, errs.Unsupported},
		{bmc.PowerReset, true, all, []rf.ResetType{"ForceRestart"}, ""},
		{bmc.PowerReset, false, all, []rf.ResetType{"On"}, ""},
		{bmc.PowerGracefulRestart, true, all, []rf.ResetType{"GracefulRestart"}, ""},
		{bmc.PowerGracefulRestart, false, all, []rf.ResetType{"On"}, ""},
		{bmc.PowerCycle, true, all, []rf.ResetType{"PowerCycle"}, ""},
		{bmc.PowerCycle, true, dmtf, []rf.ResetType{"ForceOff", "On"}, ""},
		{bmc.PowerCycle, false, dmtf, []rf.ResetType{"On"}, ""},
		{bmc.PowerCycle, true, []rf.ResetType{"On", "GracefulShutdown"}, nil, errs.Unsupported},
		{bmc.PowerNMI, true, dmtf, []rf.ResetType{"Nmi"}, ""},
		{bmc.PowerNMI, true, []rf.ResetType{"On", "ForceOff"}, nil, errs.Unsupported},
		{bmc.PowerNMI, false, all, nil, errs.InvalidState},
		{"explode", true, all, nil, errs.InvalidInput},
	}
	for _, tt := range tests {
		got, err := planReset(tt.action, tt.on, tt.allowed)
		if errs.KindOf(err) != tt.kind {
			t.Errorf("planReset(%s, on=%t, %v) error = %v, want kind %q", tt.action, tt.on, tt.allowed, err, tt.kind)
			continue
		}
		if tt.kind == errs.Unsupported && !strings.Contains(err.Error(), string(tt.action)) {
			t.Errorf("planReset(%s, on=%t, %v) = %v, want the action named", tt.action, tt.on, tt.allowed, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("planReset(%s, on=%t, %v) mismatch (-want +got):\n%s", tt.action, tt.on, tt.allowed, diff)
		}
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	ipmi, _ := bmc.ParseAddress(bmc.DriverIPMI, "10.0.0.1")
	rfa, _ := bmc.ParseAddress(bmc.DriverRedfish, "10.0.0.1")
	tests := []struct {
		cfg   Config
		field string
	}{
		{Config{Address: ipmi, Credentials: bmc.Credentials{Username: "u"}}, "bmc.driver"},
		{Config{Credentials: bmc.Credentials{Username: "u"}}, "bmc.driver"},
		{Config{Address: rfa}, "bmc.credentials"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		var e *errs.Error
		if !errs.Is(err, errs.InvalidInput) || !errors.As(err, &e) || e.Field != tt.field {
			t.Errorf("New(%+v) = %v, want INVALID_INPUT on %s", tt.cfg.Address, err, tt.field)
		}
	}
}

func TestFailNamesHostAndStatus(t *testing.T) {
	t.Parallel()
	addr, _ := bmc.ParseAddress(bmc.DriverRedfish, "https://bmc-7.example:8443/redfish/v1/Systems/1")
	d, err := New(Config{Address: addr, Credentials: bmc.Credentials{Username: "ops", Password: "pw-never-shown"}})
	if err != nil {
		t.Fatal(err)
	}
	const limit = `{"error":{"code":"Base.1.8.GeneralError","message":"x","@Message.ExtendedInfo":[{"MessageId":"Base.1.8.SessionLimitExceeded","Message":"busy"}]}}`
	tests := []struct {
		status int
		body   string
		kind   errs.Kind
		want   []string
		reason string // what the site's BMC gate acts on
	}{
		{401, `{"error":{"message":"nope"}}`, errs.Unauthenticated, []string{"bmc-7.example:8443", "401", "check the BMC credentials", `"ops"`}, ""},
		{403, ``, errs.DriverError, []string{"bmc-7.example:8443", "403", "privilege"}, ""},
		{500, `{"error":{"message":"fan on fire","@Message.ExtendedInfo":[{"Message":"try later"}]}}`, errs.DriverError, []string{"bmc-7.example:8443", "500", "try later"}, bmc.ReasonUnreachable},
		{503, `not json`, errs.DriverError, []string{"503", "not json"}, bmc.ReasonBusy},
		{429, ``, errs.DriverError, []string{"429"}, bmc.ReasonBusy},
		{400, limit, errs.DriverError, []string{"400", "busy"}, bmc.ReasonBusy},
		{400, `{"error":{"code":"Base.1.8.PropertyValueNotInList","message":"session limit"}}`, errs.DriverError, []string{"400"}, ""},
	}
	for _, tt := range tests {
		err := d.fail("power.setPower", common.ConstructError(tt.status, []byte(tt.body)))
		if !errs.Is(err, tt.kind) {
			t.Errorf("fail(HTTP %d) = %v, want %s", tt.status, err, tt.kind)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("fail(HTTP %d) = %q, want it to mention %q", tt.status, err, w)
			}
		}
		if r := errs.ReasonOf(err); r != tt.reason {
			t.Errorf("fail(HTTP %d %s): reason %q, want %q", tt.status, tt.body, r, tt.reason)
		}
		if strings.Contains(err.Error(), "pw-never-shown") {
			t.Errorf("fail(HTTP %d) = %q, holds the password", tt.status, err)
		}
	}
	collection := &common.CollectionError{Failures: map[string]error{"/redfish/v1/Systems": common.ConstructError(401, nil)}}
	if err := d.fail("inspect", collection); !strings.Contains(err.Error(), "credentials") {
		t.Errorf("fail(CollectionError{401}) = %v, want the credentials message", err)
	}
	for _, tt := range []struct {
		err    error
		reason string
	}{
		{&url.Error{Op: "Get", URL: "https://bmc-7.example:8443/redfish/v1/", Err: io.EOF}, bmc.ReasonUnreachable}, // closed in the TLS handshake
		{&url.Error{Op: "Get", URL: "https://bmc-7.example:8443/redfish/v1/", Err: syscall.ECONNREFUSED}, bmc.ReasonUnreachable},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), bmc.ReasonUnreachable},
		{fmt.Errorf("get: %w", context.Canceled), ""},
		{errors.New("the BMC's service root /redfish/v1/ is not JSON"), ""},
	} {
		if r := errs.ReasonOf(d.fail("inspect", tt.err)); r != tt.reason {
			t.Errorf("fail(%v): reason %q, want %q", tt.err, r, tt.reason)
		}
	}
}
