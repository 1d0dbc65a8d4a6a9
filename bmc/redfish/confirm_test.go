package redfish

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/google/go-cmp/cmp"
)

// noPowerCycle is what many BMCs allow: no PowerCycle reset type.
var noPowerCycle = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi"}

// lateBMC runs an emulated BMC whose power changes land delay after the
// Reset was accepted and that offers no PowerCycle.
func lateBMC(t *testing.T, delay time.Duration, on bool) *redfishbmc.BMC {
	t.Helper()
	return serveBMC(t, redfishbmc.Config{Username: "admin", Password: "s3cret", PowerDelay: delay,
		ResetTypes: noPowerCycle, PoweredOn: on}, listen(t))
}

// serveBMC runs an emulated BMC of cfg on ln until the test ends.
func serveBMC(t *testing.T, cfg redfishbmc.Config, ln net.Listener) *redfishbmc.BMC {
	t.Helper()
	b, err := redfishbmc.New(cfg)
	if err != nil {
		t.Fatalf("redfishbmc.New() = %v", err)
	}
	b.Start(ln)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// listen returns a listener on a free loopback port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func newDriver(t *testing.T, systemURL, password string) *Driver {
	t.Helper()
	addr, err := bmc.ParseAddress(bmc.DriverRedfish, strings.Replace(systemURL, "http://", "redfish+http://", 1))
	if err != nil {
		t.Fatalf("ParseAddress(%q) = %v", systemURL, err)
	}
	d, err := New(Config{Address: addr, Credentials: bmc.Credentials{Username: "admin", Password: password}})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// TestPowerIsConfirmed: against a BMC that applies power changes 300 ms
// late, every action returns only once the BMC reports the state it asked
// for, so the machine is in that state the moment SetPower returns.
func TestPowerIsConfirmed(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	b := lateBMC(t, delay, false)
	d := newDriver(t, b.SystemURL(), "s3cret")
	ctx := context.Background()
	steps := []struct {
		action bmc.PowerAction
		want   bmc.PowerState
		boots  int
	}{
		{bmc.PowerOn, bmc.On, 1},
		{bmc.PowerOff, bmc.Off, 1},
		{bmc.PowerOn, bmc.On, 2}, // at once after the off: the off has landed, so the on is not a no-op
		{bmc.PowerGracefulOff, bmc.Off, 2},
		{bmc.PowerReset, bmc.On, 3}, // a reset of a machine that is off powers it on
		{bmc.PowerOff, bmc.Off, 3},
	}
	for _, s := range steps {
		start := time.Now()
		res, err := d.SetPower(ctx, s.action)
		if err != nil {
			t.Fatalf("SetPower(%s) = %v", s.action, err)
		}
		if got := b.State().Power; got != s.want {
			t.Fatalf("BMC power when SetPower(%s) returned after %v = %s, want %s", s.action, time.Since(start), got, s.want)
		}
		if res.State != s.want || res.Took < delay || res.Took > time.Since(start) || res.Reads < 2 {
			t.Errorf("SetPower(%s) = %+v, want state %s confirmed after ≥ %v and ≥ 2 reads", s.action, res, s.want, delay)
		}
		if got := b.State().Boots; got != s.boots {
			t.Errorf("BMC boots after SetPower(%s) = %d, want %d", s.action, got, s.boots)
		}
	}
}

// TestCycleWithoutPowerCycle: on a running machine whose BMC has no
// PowerCycle and lands changes late, cycle is ForceOff, confirmed off, On,
// confirmed on, and leaves the machine on after one more boot, every time.
func TestCycleWithoutPowerCycle(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	b := lateBMC(t, delay, true)
	d := newDriver(t, b.SystemURL(), "s3cret")
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		if _, err := d.SetPower(ctx, bmc.PowerCycle); err != nil {
			t.Fatalf("SetPower(cycle) #%d = %v", i, err)
		}
		if st := b.State(); st.Power != bmc.On || st.Boots != i {
			t.Errorf("when cycle #%d returned: BMC power %s, boots %d, want on, %d", i, st.Power, st.Boots, i)
		}
	}
	time.Sleep(2 * delay) // nothing still pending may turn it off
	st := b.State()
	if st.Power != bmc.On || st.Boots != 3 {
		t.Errorf("%v after the last cycle: BMC power %s, boots %d, want on, 3", 2*delay, st.Power, st.Boots)
	}
	want := []string{"power:ForceOff", "power:On", "power:ForceOff", "power:On", "power:ForceOff", "power:On"}
	if diff := cmp.Diff(want, st.Calls); diff != "" {
		t.Errorf("BMC calls (-want +got):\n%s", diff)
	}
}

// TestWrongPasswordIsFinal: a wrong password fails at the first request
// that carries it, as UNAUTHENTICATED, which no activity retries, so the
// BMC sees one failed login per command and cannot lock the account.
func TestWrongPasswordIsFinal(t *testing.T) {
	t.Parallel()
	b := lateBMC(t, 0, false)
	var logins atomic.Int32
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := r.BasicAuth(); ok || (r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Sessions")) {
			logins.Add(1) // basic authentication, or a session login
		}
		b.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: counting, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String() + strings.TrimPrefix(b.SystemURL(), b.URL())
	d := newDriver(t, url, "wrong")

	_, err = d.SetPower(context.Background(), bmc.PowerOn)
	if !errs.Is(err, errs.Unauthenticated) || errs.KindOf(err).Retryable() {
		t.Fatalf("SetPower(on) with a wrong password = %v, want UNAUTHENTICATED (final)", err)
	}
	for _, w := range []string{ln.Addr().String(), "401", `"admin"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("SetPower(on) with a wrong password = %q, want it to name %q", err, w)
		}
	}
	if n := logins.Load(); n != 1 {
		t.Errorf("requests carrying the wrong password = %d, want 1", n)
	}
	if got := b.State().Calls; len(got) != 0 {
		t.Errorf("BMC calls after a failed login = %v, want none", got)
	}
}

// TestPowerNotConfirmedFails: a change the BMC does not report within the
// bound is a DRIVER_ERROR naming the BMC, the state it reports and the one
// asked for, never a success, and it ends within the bound.
func TestPowerNotConfirmedFails(t *testing.T) {
	t.Parallel()
	b := lateBMC(t, 10*time.Second, false)
	addr, err := bmc.ParseAddress(bmc.DriverRedfish, strings.Replace(b.SystemURL(), "http://", "redfish+http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	const bound = 700 * time.Millisecond
	d, err := New(Config{Address: addr, Credentials: bmc.Credentials{Username: "admin", Password: "s3cret"},
		Confirm: bmc.Confirm{Timeout: bound}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := d.SetPower(context.Background(), bmc.PowerOn)
	took := time.Since(start)
	if !errs.Is(err, errs.DriverError) {
		t.Fatalf("SetPower(on) on a BMC that lands it after 10s = %+v, %v, want DRIVER_ERROR", res, err)
	}
	for _, w := range []string{addr.HostPort(), `"off"`, "reach power on after Reset On"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("SetPower(on) = %q, want it to name %q", err, w)
		}
	}
	if took < bound || took > bound+time.Second {
		t.Errorf("SetPower(on) failed after %v, want %v (+ < 1s)", took, bound)
	}
	if res.State != bmc.Off || res.Reads < 3 {
		t.Errorf("SetPower(on) result = %+v, want the last state off after several reads", res)
	}
}
