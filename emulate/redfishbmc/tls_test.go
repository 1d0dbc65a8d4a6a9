package redfishbmc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	bmcredfish "github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/errs"
)

// TestDriverTLS serves the emulated BMC over HTTPS with a self-signed
// certificate: refused (UNAUTHENTICATED, final) by default (naming the enroll flags that fix it),
// accepted with its CA, with its key's pin, and with insecure; refused with
// another key's pin.
func TestDriverTLS(t *testing.T) {
	t.Parallel()
	b, err := New(Config{Username: testUser, Password: testPass, UUID: testUUID, MACs: testMACs()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(b)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test
	srv.StartTLS()
	t.Cleanup(srv.Close)
	other := selfSigned(t) // another key (every httptest server has the same one)
	addr, err := bmc.ParseAddress(bmc.DriverRedfish, srv.URL+b.systemPath)
	if err != nil {
		t.Fatalf("ParseAddress(%s) = %v", srv.URL, err)
	}
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	pin := bmc.SPKIPin(srv.Certificate())
	tests := []struct {
		name string
		tls  bmc.TLS
		want []string // in the error; none: accepted
	}{
		{"default", bmc.TLS{}, []string{"does not trust", "--bmc-ca-file", "--bmc-tls-pin", "--bmc-insecure", pin}},
		{"ca", bmc.TLS{CAPEM: ca}, nil},
		{"pin", bmc.TLS{SPKIPin: pin}, nil},
		{"wrong pin", bmc.TLS{SPKIPin: bmc.SPKIPin(other)}, []string{"not the enrolled", pin, "--bmc-tls-pin"}},
		{"wrong ca", bmc.TLS{CAPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.Raw}))},
			[]string{"--bmc-ca-file"}},
		{"insecure", bmc.TLS{Insecure: true}, nil},
	}
	for _, tt := range tests {
		d, err := bmcredfish.New(bmcredfish.Config{Address: addr, Credentials: bmc.Credentials{Username: testUser, Password: testPass, TLS: tt.tls}})
		if err != nil {
			t.Fatalf("New(%s) = %v", tt.name, err)
		}
		_, err = d.PowerState(context.Background())
		d.Logout(context.Background())
		_ = d.Close()
		if tt.want == nil {
			if err != nil {
				t.Errorf("PowerState() with TLS %s = %v, want accepted", tt.name, err)
			}
			continue
		}
		if !errs.Is(err, errs.Unauthenticated) {
			t.Errorf("PowerState() with TLS %s = %v, want UNAUTHENTICATED", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("PowerState() with TLS %s = %q, want it to name %q", tt.name, err, w)
			}
		}
	}
	if st := b.State(); st.Sessions != 0 {
		t.Errorf("State().Sessions = %d, want 0", st.Sessions)
	}
}

// selfSigned makes a self-signed certificate for 127.0.0.1 with a key of its own.
func selfSigned(t *testing.T) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-bmc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
