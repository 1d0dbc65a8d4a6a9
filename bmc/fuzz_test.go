package bmc

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

// FuzzParseAddress checks that ParseAddress never panics, refuses only with
// INVALID_INPUT, and that what it accepts prints to a form that parses back to
// the same address.
func FuzzParseAddress(f *testing.F) {
	seeds := []string{
		"10.20.0.14", "10.20.0.14:623", "bmc-r12-14.example", "[fd00::1]:8443", "fd00::1",
		"https://192.168.122.1:8000/redfish/v1/Systems/4c4c4544-0042", "redfish+http://127.0.0.1:8000/redfish/v1/Systems/1",
		"redfish+https://h/redfish/v1/", "ipmi://10.0.0.1:623", "http://[::1]/redfish/v1/Systems/x",
		"", ":", "::", ":::", "[", "[]", "[]:", "[::1", "[::1]]", "[::1]:", "[::1]:99999", "[1.2.3.4]",
		"https://", "https://:80", "https://@h", "https://u:p@h", "u@h", "h:p", "h:-1", "h:0x50", "h:00000080",
		"https://h:8000:9000", "https://h/redfish/v1/Systems/..", "https://h/redfish/v1/Systems/a/b",
		"https://h/redfish/v1/Systems//", "https://h//redfish/v1", "https://h?x", "https://h#f", "https://h/%00",
		"h\x00", "h\r\nHost: evil", "h\t", "\x7f", "é.example", "h..", ".h", "h.", "-h", "h-", "1.2.3", "999.1.1.1",
		"fe80::1%eth0", "[fe80::1%25eth0]:623", "0.0.0.0", "224.0.0.1", "HTTPS://H", "ipmi://h/", "redfish+ftp://h",
		"https:/h", "https:h", "//h", "/h", strings.Repeat("a", 64) + ".example", strings.Repeat("a.", 130) + "b",
		strings.Repeat("x", 2000), "https://h/redfish/v1/Systems/[x]", "::ffff:10.0.0.1", "[::ffff:10.0.0.1]:443",
	}
	for _, s := range seeds {
		for _, d := range []string{"", DriverRedfish, DriverIPMI} {
			f.Add(d, s)
		}
	}
	f.Fuzz(func(t *testing.T, driver, raw string) {
		a, err := ParseAddress(driver, raw)
		if err != nil {
			if !errs.Is(err, errs.InvalidInput) {
				t.Fatalf("ParseAddress(%q, %q) = %v, want INVALID_INPUT", driver, raw, err)
			}
			return
		}
		s := a.String()
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] >= 0x7f {
				t.Fatalf("ParseAddress(%q, %q).String() = %q, holds byte %#x", driver, raw, s, s[i])
			}
		}
		b, err := ParseAddress(a.Driver, s)
		if err != nil {
			t.Fatalf("ParseAddress(%q, %q) = %v, want %+v (round trip of %q)", a.Driver, s, err, a, raw)
		}
		if b != a {
			t.Fatalf("ParseAddress(%q, %q) = %+v, want %+v (round trip of %q)", a.Driver, s, b, a, raw)
		}
	})
}
