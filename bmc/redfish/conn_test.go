package redfish

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
)

// countingListener counts the connections a server accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestCallsShareAConnection: the site agent makes a Driver for each BMC
// call and closes it after; consecutive calls to one BMC reuse one
// connection (each used to open its own, with a TLS handshake on both ends).
func TestCallsShareAConnection(t *testing.T) {
	t.Parallel()
	ln := &countingListener{Listener: listen(t)}
	b := serveBMC(t, redfishbmc.Config{Username: "admin", Password: "s3cret"}, ln)

	for i := range 3 {
		d := newDriver(t, b.SystemURL(), "s3cret")
		if _, err := d.PowerState(context.Background()); err != nil {
			t.Fatalf("call %d: PowerState() = %v", i, err)
		}
		if err := d.Close(); err != nil {
			t.Fatalf("call %d: Close() = %v", i, err)
		}
	}
	if got := ln.accepted.Load(); got != 1 {
		t.Errorf("the BMC accepted %d connections for 3 calls, want 1", got)
	}
}

// TestPowerRequests: a power action with the session kept from the BMC's
// last operation is three requests: the system (whose state is the
// action's first read), the Reset and the read confirming it. It was
// eight: a login (the service root, a POST) and a logout besides, and the
// system read twice; then four, with the service root read again by every
// operation (now answered from memory, rootCache).
func TestPowerRequests(t *testing.T) {
	t.Parallel()
	b := serveBMC(t, redfishbmc.Config{Username: "admin", Password: "s3cret"}, listen(t))
	d := newDriver(t, b.SystemURL(), "s3cret")
	t.Cleanup(func() { d.Logout(context.Background()) })
	if _, err := d.PowerState(context.Background()); err != nil {
		t.Fatalf("PowerState() = %v", err)
	}
	before := b.State().Requests
	if _, err := d.SetPower(context.Background(), bmc.PowerOn); err != nil {
		t.Fatalf("SetPower(on) = %v", err)
	}
	if got := b.State().Requests - before; got != 3 {
		t.Errorf("SetPower(on) on a machine off took %d requests, want 3", got)
	}
}

// TestKeptSessionKnowsTheSystem: with an address that names no system, the
// first operation lists the BMC's systems and the next, on the kept
// session, reads the one it found at once: the system, one request instead
// of three (the service root, now answered from memory, and the list; real
// BMCs answer each in 0.1 to 1 s).
func TestKeptSessionKnowsTheSystem(t *testing.T) {
	t.Parallel()
	b := serveBMC(t, redfishbmc.Config{Username: "admin", Password: "s3cret"}, listen(t))
	d := newDriver(t, b.URL(), "s3cret")
	t.Cleanup(func() { d.Logout(context.Background()) })
	if _, err := d.PowerState(context.Background()); err != nil { // logs in, lists the systems
		t.Fatalf("PowerState() = %v", err)
	}
	for i := range 2 {
		before := b.State().Requests
		if _, err := d.PowerState(context.Background()); err != nil {
			t.Fatalf("PowerState() again = %v", err)
		}
		if got := b.State().Requests - before; got != 1 {
			t.Errorf("PowerState() %d on the kept session took %d requests, want 1 (the system)", i+2, got)
		}
	}
	if st := b.State(); st.Logins != 1 {
		t.Errorf("logins = %d, want 1", st.Logins)
	}
}

// TestLogoutAll: the sessions kept for every BMC are logged out at once,
// as bcd site does when it stops. Not parallel: LogoutAll ends the
// sessions other tests keep.
func TestLogoutAll(t *testing.T) {
	var bmcs []*redfishbmc.BMC
	for range 2 {
		b := serveBMC(t, redfishbmc.Config{Username: "admin", Password: "s3cret"}, listen(t))
		if _, err := newDriver(t, b.SystemURL(), "s3cret").PowerState(context.Background()); err != nil {
			t.Fatalf("PowerState() = %v", err)
		}
		if st := b.State(); st.Sessions != 1 {
			t.Fatalf("sessions open after an operation = %d, want 1 (kept)", st.Sessions)
		}
		bmcs = append(bmcs, b)
	}
	LogoutAll(context.Background())
	for i, b := range bmcs {
		if st := b.State(); st.Sessions != 0 || st.Logins != 1 {
			t.Errorf("BMC %d: sessions open, logins after LogoutAll = %d, %d, want 0, 1", i, st.Sessions, st.Logins)
		}
	}
}
