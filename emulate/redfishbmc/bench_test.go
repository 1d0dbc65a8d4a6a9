package redfishbmc

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	bmcredfish "github.com/better-compute/better-compute/bmc/redfish"
)

// BenchmarkDriverPowerState measures one PowerState against the emulated
// BMC on loopback: basic authentication, a session per operation, and a
// session over HTTPS with a pinned key through a fresh driver each time (as
// the site opens one per activity, so each pays the TLS handshake).
func BenchmarkDriverPowerState(b *testing.B) {
	emu, err := New(Config{Username: testUser, Password: testPass, UUID: testUUID, MACs: testMACs()})
	if err != nil {
		b.Fatal(err)
	}
	plain := httptest.NewServer(emu)
	b.Cleanup(plain.Close)
	tlsSrv := httptest.NewUnstartedServer(emu)
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	b.Cleanup(tlsSrv.Close)
	creds := bmc.Credentials{Username: testUser, Password: testPass}
	newDriver := func(url string, basic bool, tls bmc.TLS) *bmcredfish.Driver {
		addr, err := bmc.ParseAddress(bmc.DriverRedfish, url+emu.systemPath)
		if err != nil {
			b.Fatal(err)
		}
		c := creds
		c.TLS = tls
		d, err := bmcredfish.New(bmcredfish.Config{Address: addr, Credentials: c, BasicAuth: basic})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	run := func(b *testing.B, d func() *bmcredfish.Driver) {
		for b.Loop() {
			drv := d()
			if _, err := drv.PowerState(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	}
	basic, session := newDriver(plain.URL, true, bmc.TLS{}), newDriver(plain.URL, false, bmc.TLS{})
	b.Run("basic", func(b *testing.B) { run(b, func() *bmcredfish.Driver { return basic }) })
	b.Run("session", func(b *testing.B) { run(b, func() *bmcredfish.Driver { return session }) })
	pin := bmc.TLS{SPKIPin: bmc.SPKIPin(tlsSrv.Certificate())}
	b.Run("session-tls-pin-fresh-driver", func(b *testing.B) {
		run(b, func() *bmcredfish.Driver {
			d := newDriver(tlsSrv.URL, false, pin)
			b.Cleanup(func() { _ = d.Close() })
			return d
		})
	})
}
