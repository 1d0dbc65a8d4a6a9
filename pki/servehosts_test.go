package pki

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
)

func TestServeHostRule(t *testing.T) {
	t.Parallel()
	cpNames := []string{"cp.example.test", "10.0.0.1", "127.0.0.1", "::1", "localhost"}
	many := make([]string, 3000)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example.test", i)
	}
	tests := []struct {
		name  string
		rule  ServeHostRule
		hosts []string
		want  []string
		kind  errs.Kind
		names string // what the error must quote
	}{
		{"own names", ServeHostRule{Reserved: cpNames}, []string{"Relay.example.test.", "10.0.0.2", "relay.example.test"}, nil, errs.InvalidInput, "Relay"},
		{"canonical", ServeHostRule{Reserved: cpNames}, []string{"relay.example.test.", "::ffff:10.0.0.2", "relay.example.test"},
			[]string{"relay.example.test", "10.0.0.2"}, "", ""},
		{"the control plane's name", ServeHostRule{Reserved: cpNames}, []string{"relay.example.test", "cp.example.test"}, nil, errs.PermissionDenied, "cp.example.test"},
		{"the control plane's address", ServeHostRule{Reserved: cpNames, LoopbackLab: true}, []string{"10.0.0.1"}, nil, errs.PermissionDenied, "10.0.0.1"},
		{"loopback off a lab", ServeHostRule{Reserved: cpNames}, []string{"127.0.0.1"}, nil, errs.PermissionDenied, "127.0.0.1"},
		{"localhost off a lab", ServeHostRule{}, []string{"agent.localhost"}, nil, errs.PermissionDenied, "agent.localhost"},
		{"ipv6 loopback off a lab", ServeHostRule{}, []string{"::1"}, nil, errs.PermissionDenied, "::1"},
		{"loopback in a lab", ServeHostRule{Reserved: cpNames, LoopbackLab: true}, []string{"127.0.0.1", "localhost"}, []string{"127.0.0.1", "localhost"}, "", ""},
		{"3000 names", ServeHostRule{}, many, nil, errs.InvalidInput, "3000"},
		{"unspecified", ServeHostRule{}, []string{"0.0.0.0"}, nil, errs.InvalidInput, "0.0.0.0"},
		{"wildcard", ServeHostRule{}, []string{"*.example.test"}, nil, errs.InvalidInput, "*.example.test"},
		{"undeclared at renewal", ServeHostRule{Declared: []string{"relay.example.test"}}, []string{"other.example.test"}, nil, errs.PermissionDenied, "other.example.test"},
		{"declared at renewal", ServeHostRule{Declared: []string{"relay.example.test"}}, []string{"relay.example.test"}, []string{"relay.example.test"}, "", ""},
	}
	for _, tt := range tests {
		got, err := tt.rule.Check(tt.hosts)
		if tt.kind == "" {
			if err != nil || !cmp.Equal(got, tt.want) {
				t.Errorf("%s: Check(%v) = %v, %v; want %v", tt.name, tt.hosts, got, err, tt.want)
			}
			continue
		}
		if !errs.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.names) {
			t.Errorf("%s: Check() = %v; want %s naming %s", tt.name, err, tt.kind, tt.names)
		}
	}
}

// Every certificate the CA issues carries its role and identity as its one
// URI SAN, serving certificates too.
func TestEveryCertificateCarriesItsRole(t *testing.T) {
	t.Parallel()
	ca, _ := newTestCA(t)
	key, _, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range Roles() {
		plain, err := ca.Issue(key.Public(), role, "id-1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		serving, err := ca.IssueServer(key.Public(), role, "id-1", []string{"relay.example.test"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range [][]byte{plain, serving} {
			c, _ := ParseCert(p)
			want := "spiffe://" + ca.TrustDomain() + "/" + string(role) + "/id-1"
			if len(c.URIs) != 1 || c.URIs[0].String() != want {
				t.Errorf("Issue(%s) URIs = %v, want [%s]", role, c.URIs, want)
			}
		}
	}
}

func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1", "fe80::1%eth0", "LOCALHOST", "a..b", "x.localhost.", "\x00", "::ffff:127.0.0.1", "255.255.255.255"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		c, err := CanonicalHost(h)
		if err != nil {
			return
		}
		again, err := CanonicalHost(c)
		if err != nil || again != c {
			t.Errorf("CanonicalHost(CanonicalHost(%q) = %q) = %q, %v; want it unchanged", h, c, again, err)
		}
		if IsLoopbackHost(c) != (ServeHostRule{}.allow(c, nil) != nil) {
			t.Errorf("ServeHostRule{}.allow(%q) disagrees with IsLoopbackHost", c)
		}
	})
}
