package ipmi

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
	"github.com/better-compute/better-compute/errs"
)

// relay forwards UDP between the driver and ipmi_sim, counting the RAKP
// Message 1 packets (the login attempts) the BMC receives.
type relay struct {
	addr   string
	logins atomic.Int32
}

func startRelay(t *testing.T, upstream int) *relay {
	t.Helper()
	front, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(upstream)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close(); back.Close() })
	r := &relay{addr: front.LocalAddr().String()}
	var client atomic.Value
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := front.ReadFrom(buf)
			if err != nil {
				return
			}
			client.Store(from)
			// RMCP header (4 bytes), then auth type 06h (RMCP+) and the
			// payload type, 12h for RAKP Message 1.
			if n > 5 && buf[4] == 0x06 && buf[5]&0x3f == 0x12 {
				r.logins.Add(1)
			}
			_, _ = back.Write(buf[:n])
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := back.Read(buf)
			if err != nil {
				return
			}
			if to, ok := client.Load().(net.Addr); ok {
				_, _ = front.WriteTo(buf[:n], to)
			}
		}
	}()
	return r
}

// TestWrongPasswordIsOneFinalAttempt: a wrong password is one login at the
// BMC and an UNAUTHENTICATED error, final, naming the BMC and the user; the
// right password still works afterwards.
func TestWrongPasswordIsOneFinalAttempt(t *testing.T) {
	t.Parallel()
	s := ipmisim.Start(t, ipmisim.Config{})
	r := startRelay(t, s.Port())
	addr, err := bmc.ParseAddress(bmc.DriverIPMI, "ipmi://"+r.addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ user, pass string }{{simUser, "not-the-password"}, {"nobody", simPass}} {
		r.logins.Store(0)
		d, err := New(Config{Address: addr, Credentials: bmc.Credentials{Username: tt.user, Password: tt.pass}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = d.SetPower(context.Background(), bmc.PowerOn)
		if !errs.Is(err, errs.Unauthenticated) || errs.KindOf(err).Retryable() {
			t.Fatalf("SetPower(on) as %s with a wrong password = %v, want UNAUTHENTICATED (final)", tt.user, err)
		}
		for _, w := range []string{r.addr, `"` + tt.user + `"`, "credentials"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("SetPower(on) as %s = %q, want it to name %q", tt.user, err, w)
			}
		}
		if strings.Contains(err.Error(), tt.pass) || strings.Contains(err.Error(), "\n") {
			t.Errorf("SetPower(on) = %q, holds the password or a newline", err)
		}
		if n := r.logins.Load(); n != 1 {
			t.Errorf("login attempts at the BMC as %s = %d, want 1", tt.user, n)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the refused login took %v, want under 1s", took)
		}
	}
	if got := s.Read(t, "log"); got != "" {
		t.Errorf("chassis_control sets after refused logins = %q, want none", got)
	}
	if _, err := driverFor(t, s, simPass, Config{}).SetPower(context.Background(), bmc.PowerOn); err != nil {
		t.Errorf("SetPower(on) with the right password after refused ones = %v", err)
	}
}

// TestUnreachableBMC: a BMC that does not answer fails within Exchange ×
// (Retries+1) with a retryable DRIVER_ERROR naming it, whether its port is
// closed or its answers are lost.
func TestUnreachableBMC(t *testing.T) {
	t.Parallel()
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	closed := ipmisim.FreeUDPPort(t)
	const exchange, retries = 300 * time.Millisecond, 2
	for _, tt := range []struct {
		name, hostport, want string
	}{
		{"silent", silent.LocalAddr().String(), "did not answer in time"},
		{"closed port", net.JoinHostPort("127.0.0.1", strconv.Itoa(closed)), "cannot reach BMC"},
	} {
		addr, err := bmc.ParseAddress(bmc.DriverIPMI, "ipmi://"+tt.hostport)
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(Config{Address: addr, Credentials: bmc.Credentials{Username: simUser, Password: simPass},
			Exchange: exchange, Retries: retries})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = d.SetPower(context.Background(), bmc.PowerOff)
		took := time.Since(start)
		if !errs.Is(err, errs.DriverError) || !strings.Contains(err.Error(), tt.hostport) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("SetPower(off) on a %s BMC = %v, want DRIVER_ERROR naming %s and saying %q", tt.name, err, tt.hostport, tt.want)
		}
		if r := errs.ReasonOf(err); r != bmc.ReasonUnreachable {
			t.Errorf("SetPower(off) on a %s BMC: reason %q, want %q", tt.name, r, bmc.ReasonUnreachable)
		}
		if bound := exchange*(retries+1) + 500*time.Millisecond; took > bound {
			t.Errorf("SetPower(off) on a %s BMC took %v, want under %v", tt.name, took, bound)
		}
	}
}

// TestGracefulRestartRefusedBeforeSending: graceful-restart, which IPMI
// lacks, is UNSUPPORTED at once, without contacting the BMC (here: nothing
// listens, which would take seconds to find out).
func TestGracefulRestartRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	addr, _ := bmc.ParseAddress(bmc.DriverIPMI, "ipmi://192.0.2.1:623") // TEST-NET-1: never answers
	d, err := New(Config{Address: addr, Credentials: bmc.Credentials{Username: simUser}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = d.SetPower(context.Background(), bmc.PowerGracefulRestart)
	if !errs.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "graceful restart") || time.Since(start) > 50*time.Millisecond {
		t.Errorf("SetPower(graceful-restart) = %v after %v, want UNSUPPORTED at once", err, time.Since(start))
	}
}
