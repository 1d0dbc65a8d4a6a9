package bmc

import (
	"errors"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/google/go-cmp/cmp"
)

func TestParseAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		driver, raw string
		want        Address
		str         string
	}{
		{"redfish", "10.20.0.14", Address{Driver: "redfish", Scheme: "https", Host: "10.20.0.14"}, "https://10.20.0.14"},
		{"redfish", "10.20.0.14:8443", Address{Driver: "redfish", Scheme: "https", Host: "10.20.0.14", Port: 8443}, "https://10.20.0.14:8443"},
		{"redfish", "https://192.168.122.1:8000/redfish/v1/Systems/4c4c4544-0042-3410-8057-b4c04f4d3332",
			Address{Driver: "redfish", Scheme: "https", Host: "192.168.122.1", Port: 8000, SystemID: "4c4c4544-0042-3410-8057-b4c04f4d3332"},
			"https://192.168.122.1:8000/redfish/v1/Systems/4c4c4544-0042-3410-8057-b4c04f4d3332"},
		{"", "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1", Address{Driver: "redfish", Scheme: "http", Host: "127.0.0.1", Port: 8000, SystemID: "1"}, "http://127.0.0.1:8000/redfish/v1/Systems/1"},
		{"redfish", "HTTPS://BMC-R12-14.Example.COM/redfish/v1/", Address{Driver: "redfish", Scheme: "https", Host: "bmc-r12-14.example.com"}, "https://bmc-r12-14.example.com"},
		{"redfish", "https://[fd00::14]:8443/redfish/v1/Systems/1/", Address{Driver: "redfish", Scheme: "https", Host: "fd00::14", Port: 8443, SystemID: "1"}, "https://[fd00::14]:8443/redfish/v1/Systems/1"},
		{"redfish", "fd00::14", Address{Driver: "redfish", Scheme: "https", Host: "fd00::14"}, "https://[fd00::14]"},
		{"ipmi", "10.20.0.14", Address{Driver: "ipmi", Host: "10.20.0.14"}, "10.20.0.14"},
		{"ipmi", "ipmi://[fd00::14]:623", Address{Driver: "ipmi", Host: "fd00::14"}, "fd00::14"}, // the default port is dropped
		{"redfish", "https://10.0.0.5:443/redfish/v1/Systems/1", Address{Driver: "redfish", Scheme: "https", Host: "10.0.0.5", SystemID: "1"},
			"https://10.0.0.5/redfish/v1/Systems/1"},
		{"", "redfish+http://[::ffff:10.0.0.5]:80", Address{Driver: "redfish", Scheme: "http", Host: "10.0.0.5"}, "http://10.0.0.5"},
		{"ipmi", "bmc1:6230", Address{Driver: "ipmi", Host: "bmc1", Port: 6230}, "bmc1:6230"},
	}
	for _, tt := range tests {
		got, err := ParseAddress(tt.driver, tt.raw)
		if err != nil {
			t.Errorf("ParseAddress(%q, %q) = %v, want nil error", tt.driver, tt.raw, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseAddress(%q, %q) mismatch (-want +got):\n%s", tt.driver, tt.raw, diff)
		}
		if s := got.String(); s != tt.str {
			t.Errorf("ParseAddress(%q, %q).String() = %q, want %q", tt.driver, tt.raw, s, tt.str)
		}
	}
}

func TestParseAddressRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		driver, raw, field, msg string
	}{
		{"redfish", "", "bmc.address", "empty"},
		{"redfish", "ftp://10.0.0.1", "bmc.address", "unknown scheme"},
		{"ipmi", "https://10.0.0.1", "bmc.address", "for the redfish driver"},
		{"redfish", "https://admin:hunter2@10.0.0.1/redfish/v1", "bmc.address", "credentials"},
		{"redfish", "https:///redfish/v1/Systems/1", "bmc.address", "no host"},
		{"redfish", "https://:8000", "bmc.address", "no host"},
		{"redfish", "10.0.0.1:", "bmc.address", "empty port"},
		{"redfish", "10.0.0.1:0", "bmc.address", "port"},
		{"redfish", "10.0.0.1:65536", "bmc.address", "port"},
		{"redfish", "10.0.0.1:+80", "bmc.address", "port"},
		{"redfish", "10.0.0.1:http", "bmc.address", "port"},
		{"redfish", "10.0.0.256", "bmc.address", "not a valid IP"},
		{"redfish", "bmc\x00.example", "bmc.address", "control character"},
		{"redfish", "bmc.example\n", "bmc.address", "control character"},
		{"redfish", "bmc example", "bmc.address", "not allowed"},
		{"redfish", "https://bmc/redfish/v1/Systems/1?x=1", "bmc.address", "not allowed"},
		{"redfish", "https://bmc/redfish/v1/Systems/%2e%2e", "bmc.address", "not allowed"},
		{"redfish", "https://bmc/redfish/v1/Systems/../Managers", "bmc.address", "not a Redfish system"},
		{"redfish", "https://bmc/redfish/v1/Managers/1", "bmc.address", "not a Redfish system"},
		{"redfish", "https://bmc/redfish/v1/Systems/", "bmc.address", "not a Redfish system"},
		{"redfish", "10.0.0.1/redfish/v1", "bmc.address", "needs a scheme"},
		{"ipmi", "ipmi://10.0.0.1/x", "bmc.address", "takes no path"},
		{"redfish", "[10.0.0.1]:443", "bmc.address", "not an IPv6"},
		{"redfish", "[fd00::1", "bmc.address", "missing ]"},
		{"redfish", "[fd00::1]x", "bmc.address", "unexpected"},
		{"redfish", "fe80::1::2", "bmc.address", "not a valid IPv6"},
		{"redfish", "0.0.0.0", "bmc.address", "cannot be a BMC"},
		{"redfish", "-bmc.example", "bmc.address", "neither"},
		{"redfish", "bmc..example", "bmc.address", "neither"},
		{"redfish", "bmc.éxample", "bmc.address", "non-ASCII"},
		{"", "10.0.0.1", "bmc.driver", "give the BMC driver"},
		{"idrac", "10.0.0.1", "bmc.driver", "unknown BMC driver"},
	}
	for _, tt := range tests {
		got, err := ParseAddress(tt.driver, tt.raw)
		if err == nil {
			t.Errorf("ParseAddress(%q, %q) = %+v, want INVALID_INPUT", tt.driver, tt.raw, got)
			continue
		}
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.InvalidInput || e.Field != tt.field || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("ParseAddress(%q, %q) = %v, want INVALID_INPUT %s mentioning %q", tt.driver, tt.raw, err, tt.field, tt.msg)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseAddress(%q, %q) = %v, leaks the password", tt.driver, tt.raw, err)
		}
	}
}

func TestAddressHostPort(t *testing.T) {
	t.Parallel()
	tests := []struct{ driver, raw, want string }{
		{"redfish", "10.0.0.1", "10.0.0.1:443"},
		{"redfish", "http://10.0.0.1", "10.0.0.1:80"},
		{"redfish", "https://[fd00::1]:8000", "[fd00::1]:8000"},
		{"ipmi", "10.0.0.1", "10.0.0.1:623"},
	}
	for _, tt := range tests {
		a, err := ParseAddress(tt.driver, tt.raw)
		if err != nil {
			t.Fatalf("ParseAddress(%q, %q) = %v", tt.driver, tt.raw, err)
		}
		if got := a.HostPort(); got != tt.want {
			t.Errorf("ParseAddress(%q, %q).HostPort() = %q, want %q", tt.driver, tt.raw, got, tt.want)
		}
	}
}
