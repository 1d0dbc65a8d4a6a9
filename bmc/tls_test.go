package bmc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

func testCAPEM(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bmc-ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestTLSCheck(t *testing.T) {
	t.Parallel()
	https, _ := ParseAddress(DriverRedfish, "10.0.0.1")
	http, _ := ParseAddress(DriverRedfish, "http://10.0.0.1")
	ipmi, _ := ParseAddress(DriverIPMI, "10.0.0.1")
	ca := testCAPEM(t)
	pin := "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" // sha256 of nothing: well-formed
	tests := []struct {
		tls   TLS
		addr  Address
		field string // "" accepted
	}{
		{TLS{}, https, ""},
		{TLS{}, ipmi, ""},
		{TLS{CAPEM: ca}, https, ""},
		{TLS{SPKIPin: pin}, https, ""},
		{TLS{SPKIPin: "sha256//" + pin}, https, ""},
		{TLS{Insecure: true}, https, ""},
		{TLS{Insecure: true}, http, "bmc.tls"},
		{TLS{CAPEM: ca}, ipmi, "bmc.tls"},
		{TLS{Insecure: true, SPKIPin: pin}, https, "bmc.tls.insecure"},
		{TLS{CAPEM: "not pem"}, https, "bmc.tls.caPem"},
		{TLS{CAPEM: ca + "trailing"}, https, "bmc.tls.caPem"},
		{TLS{CAPEM: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}, https, "bmc.tls.caPem"},
		{TLS{CAPEM: strings.Repeat(ca, 200)}, https, "bmc.tls.caPem"},
		{TLS{SPKIPin: "abc"}, https, "bmc.tls.spkiPin"},
		{TLS{SPKIPin: pin[:40] + "===="}, https, "bmc.tls.spkiPin"},
	}
	for i, tt := range tests {
		err := tt.tls.Check("bmc.tls", tt.addr)
		var e *errs.Error
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("case %d: Check(%s, %s) = %v, want accepted", i, tt.tls, tt.addr, err)
		case tt.field != "" && (!errors.As(err, &e) || e.Kind != errs.InvalidInput || e.Field != tt.field):
			t.Errorf("case %d: Check(%s, %s) = %v, want INVALID_INPUT on %s", i, tt.tls, tt.addr, err, tt.field)
		}
		if err == nil {
			if _, err := tt.tls.ClientConfig(); err != nil {
				t.Errorf("case %d: ClientConfig() after Check = %v", i, err)
			}
		}
	}
}

// FuzzTLSCheck: Check never panics, refuses only with INVALID_INPUT, and
// what it accepts makes a client configuration.
func FuzzTLSCheck(f *testing.F) {
	ca := testCAPEM(f)
	for _, s := range []string{"", ca, ca + ca, "-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n", "\x00", strings.Repeat("-", 70000)} {
		f.Add(s, "", false)
	}
	for _, p := range []string{"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256//47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "====", "a\nb"} {
		f.Add("", p, false)
		f.Add("", p, true)
	}
	addr, _ := ParseAddress(DriverRedfish, "bmc.example")
	f.Fuzz(func(t *testing.T, caPEM, pin string, insecure bool) {
		tls := TLS{CAPEM: caPEM, SPKIPin: pin, Insecure: insecure}
		if err := tls.Check("bmc.tls", addr); err != nil {
			if !errs.Is(err, errs.InvalidInput) {
				t.Fatalf("Check(%+v) = %v, want INVALID_INPUT", tls, err)
			}
			return
		}
		if _, err := tls.ClientConfig(); err != nil {
			t.Fatalf("ClientConfig(%+v) after Check = %v", tls, err)
		}
	})
}

// FuzzParseMediaURL: never a panic, only INVALID_INPUT, and what it accepts
// is http or https with a host and no credentials.
func FuzzParseMediaURL(f *testing.F) {
	for _, s := range []string{"http://10.30.0.1:8080/a.iso", "https://cache.site-a/x.iso", "", "ftp://h/x", "http://u:p@h/x",
		"http:///x", "http://h/x y", "http://h/x#f", "HTTP://H/X", "http://[::1]:80/x", "http://%zz/", "//h/x", "http:h", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := ParseMediaURL("url", raw)
		if err != nil {
			if !errs.Is(err, errs.InvalidInput) || len(raw) > 8 && strings.Contains(err.Error(), raw) {
				t.Fatalf("ParseMediaURL(%q) = %v, want INVALID_INPUT not quoting the URL (it may hold a token)", raw, err)
			}
			return
		}
		lower := strings.ToLower(got)
		if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") || strings.ContainsAny(got, " \n#") {
			t.Fatalf("ParseMediaURL(%q) = %q, want an http(s) URL without spaces or fragment", raw, got)
		}
	})
}
