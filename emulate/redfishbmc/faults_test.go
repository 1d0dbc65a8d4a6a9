package redfishbmc

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	bmcredfish "github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/errs"
	"github.com/google/go-cmp/cmp"
)

// logBuffer collects what a driver logs, for tests that read its warnings.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// loggedDriver is driver with sessions and a logger writing to the returned buffer.
func loggedDriver(t *testing.T, systemURL string) (*bmcredfish.Driver, *logBuffer) {
	t.Helper()
	addr, err := bmc.ParseAddress(bmc.DriverRedfish, strings.Replace(systemURL, "http://", "redfish+http://", 1))
	if err != nil {
		t.Fatalf("ParseAddress(%q) = %v", systemURL, err)
	}
	var logs logBuffer
	d, err := bmcredfish.New(bmcredfish.Config{Address: addr, Credentials: bmc.Credentials{Username: testUser, Password: testPass},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("redfish.New() = %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, &logs
}

// hostOf is a BMC's host:port, as the driver's errors name it.
func hostOf(b *BMC) string { return strings.TrimPrefix(b.URL(), "http://") }

func wantIn(t *testing.T, what string, err error, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%s = %v, want it to name %q", what, err, w)
		}
	}
}

// TestDriver500s: a BMC answering HTTP 500 gives DRIVER_ERROR (retryable)
// naming the BMC and its answer, the same at every request while it
// lasts; once a burst is over the next call succeeds. The driver handled
// 500s already: this proves it against the emulated BMC.
func TestDriver500s(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		b := start(t, Config{MockupDir: mockup})
		d := driver(t, b, testUser, testPass, true)
		b.SetFaults(Faults{Fail500: 2})
		for i := 1; i <= 2; i++ {
			_, err := d.SetPower(ctx, bmc.PowerOn)
			if !errs.Is(err, errs.DriverError) || !errs.KindOf(err).Retryable() {
				t.Fatalf("SetPower(on) #%d in a burst of 500s = %v, want DRIVER_ERROR (retryable)", i, err)
			}
			wantIn(t, "SetPower(on) in a burst of 500s", err, hostOf(b), "HTTP 500", "internal service error")
		}
		if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
			t.Fatalf("SetPower(on) after the burst = %v, want nil", err)
		}
		b.SetFaults(Faults{Always500: true})
		for _, call := range []func() error{
			func() error { _, err := d.PowerState(ctx); return err },
			func() error { return d.SetBootDevice(ctx, bmc.BootPXE, false) },
			func() error { _, err := d.Inspect(ctx); return err },
		} {
			err := call()
			if !errs.Is(err, errs.DriverError) {
				t.Errorf("a call to a BMC answering 500 = %v, want DRIVER_ERROR", err)
			}
			wantIn(t, "a call to a BMC answering 500", err, hostOf(b), "HTTP 500")
		}
		if st := b.State(); st.Power != bmc.On || st.Sessions != 1 || st.Logins != 1 {
			t.Errorf("State() power, sessions, logins = %s, %d, %d, want on, 1, 1 (one session, kept)", st.Power, st.Sessions, st.Logins)
		}
	})
}

// TestDriverSlowBMCIsBounded: against a BMC that takes 500 ms to answer
// each request, a call given 1.2 s returns within it (DRIVER_ERROR, "did
// not answer in time"), and the session it opened is kept, and logged out
// by Logout. Before, the logout held the call 500 ms past its context.
func TestDriverSlowBMCIsBounded(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		b := start(t, Config{MockupDir: mockup})
		d := driver(t, b, testUser, testPass, true)
		b.SetFaults(Faults{Slow: 500 * time.Millisecond})
		const budget = 1200 * time.Millisecond
		for _, action := range []bmc.PowerAction{bmc.PowerOn, bmc.PowerCycle} {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			start := time.Now()
			_, err := d.SetPower(ctx, action)
			took := time.Since(start)
			cancel()
			t.Logf("SetPower(%s) on a BMC answering in 500 ms, given %v: returned after %v", action, budget, took)
			if !errs.Is(err, errs.DriverError) {
				t.Errorf("SetPower(%s) on a slow BMC = %v, want DRIVER_ERROR", action, err)
			}
			wantIn(t, "SetPower on a slow BMC", err, hostOf(b), "did not answer in time")
			if took > budget+200*time.Millisecond {
				t.Errorf("SetPower(%s) given %v returned after %v, want within its context (+200ms)", action, budget, took)
			}
		}
		if st := b.State(); st.Sessions != 1 || st.Logins != 1 {
			t.Errorf("State() sessions, logins after the timed-out calls = %d, %d, want 1, 1 (one session, kept)", st.Sessions, st.Logins)
		}
		d.Logout(context.Background())
		waitFor(t, "the session of the timed-out calls logged out", func() bool { return b.State().Sessions == 0 })
	})
}

// waitFor polls cond for up to 3 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 3s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// login opens a session at b as another client would, and returns a func
// that logs it out.
func login(t *testing.T, b *BMC) (logout func()) {
	t.Helper()
	code, res := do(t, http.MethodPost, b.URL()+b.sessionsPath, "", "", map[string]string{"UserName": testUser, "Password": testPass})
	id, _ := res["Id"].(string)
	if code != http.StatusCreated || id == "" {
		t.Fatalf("login = HTTP %d %v, want 201 with the session's Id", code, res)
	}
	return func() {
		if code, _ := do(t, http.MethodDelete, b.URL()+b.sessionsPath+"/"+id, testUser, testPass, nil); code != http.StatusNoContent {
			t.Errorf("logout = HTTP %d, want 204", code)
		}
	}
}

// TestDriverSessionLimit: while the BMC's only session is taken, a call
// fails at once with DRIVER_ERROR naming the BMC, its 503 and the session
// limit, changing nothing; once the session is freed the call succeeds.
// The driver handled this already: this proves it against the emulated BMC.
func TestDriverSessionLimit(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		b := start(t, Config{MockupDir: mockup})
		b.SetFaults(Faults{SessionLimit: 1})
		logout := login(t, b)
		d := driver(t, b, testUser, testPass, true)
		start := time.Now()
		_, err := d.SetPower(ctx, bmc.PowerOn)
		if !errs.Is(err, errs.DriverError) || time.Since(start) > time.Second {
			t.Fatalf("SetPower(on) with the session limit reached = %v after %v, want DRIVER_ERROR within 1s", err, time.Since(start))
		}
		wantIn(t, "SetPower(on) with the session limit reached", err, hostOf(b), "HTTP 503", "exceeding the limit")
		if st := b.State(); st.SessionLimited != 1 || st.Power != bmc.Off || len(st.Calls) != 0 {
			t.Errorf("State() limited logins, power, calls = %d, %s, %v, want 1, off, none", st.SessionLimited, st.Power, st.Calls)
		}
		logout()
		if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
			t.Fatalf("SetPower(on) once the session is free = %v, want nil", err)
		}
		d.Logout(ctx)
		if st := b.State(); st.Power != bmc.On || st.Sessions != 0 {
			t.Errorf("State() power, sessions after Logout = %s, %d, want on, 0", st.Power, st.Sessions)
		}
	})
}

// TestLatePowerLandsOnlyOnRead: the emulator's PowerOnRead fault: an
// accepted Reset is not applied, however long one waits, until the system
// is read after its delay.
func TestLatePowerLandsOnlyOnRead(t *testing.T) {
	t.Parallel()
	b := start(t, Config{})
	b.SetFaults(Faults{PowerOnRead: true, PowerLateMin: 50 * time.Millisecond, PowerLateMax: 50 * time.Millisecond})
	if code, _ := do(t, http.MethodPost, b.URL()+b.resetPath, testUser, testPass, map[string]string{"ResetType": "On"}); code != http.StatusNoContent {
		t.Fatalf("Reset On = HTTP %d, want 204", code)
	}
	time.Sleep(200 * time.Millisecond)
	if got := b.State().Power; got != bmc.Off {
		t.Errorf("power 200ms after a Reset On, the system unread = %s, want off", got)
	}
	if _, sys := do(t, http.MethodGet, b.SystemURL(), testUser, testPass, nil); sys["PowerState"] != "On" {
		t.Errorf("PowerState read 200ms after the Reset On = %v, want On", sys["PowerState"])
	}
}

// TestDriverPowerLateOnRead: against a BMC (our tree without PowerCycle,
// and the DMTF mockup, which has none) whose power changes land 50–400 ms
// late and only when the system is read again, every action is confirmed
// by the driver's own reads: the machine is in the asked state the moment
// SetPower returns, the time it took is recorded, and cycle is ForceOff,
// confirmed off, On, confirmed on.
func TestDriverPowerLateOnRead(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		cfg := Config{MockupDir: mockup}
		if mockup == "" {
			cfg.ResetTypes = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi"}
		}
		b := start(t, cfg)
		b.SetFaults(Faults{PowerOnRead: true, PowerLateMin: 50 * time.Millisecond, PowerLateMax: 400 * time.Millisecond})
		d := driver(t, b, testUser, testPass, true)
		steps := []struct {
			action bmc.PowerAction
			want   bmc.PowerState
			boots  int
		}{
			{bmc.PowerOn, bmc.On, 1}, {bmc.PowerOff, bmc.Off, 1}, {bmc.PowerOn, bmc.On, 2},
			{bmc.PowerCycle, bmc.On, 3}, {bmc.PowerCycle, bmc.On, 4}, {bmc.PowerOff, bmc.Off, 4},
		}
		for _, s := range steps {
			start := time.Now()
			res, err := d.SetPower(ctx, s.action)
			if err != nil {
				t.Fatalf("SetPower(%s) = %v", s.action, err)
			}
			t.Logf("SetPower(%s): confirmed %s after %v, %d reads", s.action, res.State, res.Took, res.Reads)
			if st := b.State(); st.Power != s.want || st.Boots != s.boots {
				t.Fatalf("when SetPower(%s) returned: BMC power %s, boots %d, want %s, %d", s.action, st.Power, st.Boots, s.want, s.boots)
			}
			if res.State != s.want || res.Took < 50*time.Millisecond || res.Took > time.Since(start) || res.Reads < 2 {
				t.Errorf("SetPower(%s) = %+v, want %s confirmed after ≥ 50ms and ≥ 2 reads", s.action, res, s.want)
			}
		}
		want := []string{"power:On", "power:ForceOff", "power:On", "power:ForceOff", "power:On", "power:ForceOff", "power:On", "power:ForceOff"}
		if diff := cmp.Diff(want, b.State().Calls); diff != "" {
			t.Errorf("BMC calls (-want +got):\n%s", diff)
		}
	})
}

// TestDriverBootOverrideStaysContinuous: a BMC that keeps a Once override
// as Continuous. The driver reads the override back and says so, a
// warning in its log naming the BMC, the asked and the reported override;
// the machine boots the device next (as asked) and again after (the
// quirk), and the later disk override, once or persistent, still makes it
// boot disk. Before, the driver did not read the override back and said
// nothing.
func TestDriverBootOverrideStaysContinuous(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		boots := make(chan bmc.BootDevice, 10)
		b := start(t, Config{MockupDir: mockup, OnBoot: func(dev bmc.BootDevice) { boots <- dev }})
		b.SetFaults(Faults{ContinuousBoot: true})
		d, logs := loggedDriver(t, b.SystemURL())
		if err := d.SetBootDevice(ctx, bmc.BootPXE, false); err != nil {
			t.Fatalf("SetBootDevice(pxe, once) = %v, want nil (the next boot is pxe)", err)
		}
		for _, w := range []string{"level=WARN", "kept Continuous, not Once", hostOf(b), "asked=Pxe/Once", "reported=Pxe/Continuous", "cannot boot once"} {
			if !strings.Contains(logs.String(), w) {
				t.Errorf("driver log after SetBootDevice(pxe, once) on a Continuous-only BMC = %q, want %q in it", logs, w)
			}
		}
		for _, step := range []struct {
			action bmc.PowerAction
			want   bmc.BootDevice
		}{{bmc.PowerOn, bmc.BootPXE}, {bmc.PowerReset, bmc.BootPXE}} {
			if _, err := d.SetPower(ctx, step.action); err != nil {
				t.Fatalf("SetPower(%s) = %v", step.action, err)
			}
			if got := waitBoot(t, boots); got != step.want {
				t.Errorf("boot after SetPower(%s) with the override kept Continuous = %s, want %s", step.action, got, step.want)
			}
		}
		for _, persistent := range []bool{false, true} {
			if err := d.SetBootDevice(ctx, bmc.BootDisk, persistent); err != nil {
				t.Fatalf("SetBootDevice(disk, persistent %t) = %v", persistent, err)
			}
			if _, err := d.SetPower(ctx, bmc.PowerReset); err != nil {
				t.Fatalf("SetPower(reset) = %v", err)
			}
			if got := waitBoot(t, boots); got != bmc.BootDisk {
				t.Errorf("boot after SetBootDevice(disk, persistent %t) = %s, want disk", persistent, got)
			}
		}
		if n := strings.Count(logs.String(), "kept Continuous"); n != 2 {
			t.Errorf("warnings about a kept Continuous override = %d, want 2 (the two Once asked)", n)
		}
	})
}

// TestDriverEjectClearsCdOverride: on a BMC that keeps a Once override
// Continuous, media.insert's Cd override boots the ISO and would boot the
// emptied drive at every boot after; EjectMedia disables it, so the next
// boot is the disk. Before, the machine went on booting cd.
func TestDriverEjectClearsCdOverride(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		boots := make(chan bmc.BootDevice, 10)
		b := start(t, Config{MockupDir: mockup, OnBoot: func(dev bmc.BootDevice) { boots <- dev }})
		b.SetFaults(Faults{ContinuousBoot: true})
		d, _ := loggedDriver(t, b.SystemURL())
		if err := d.InsertMedia(ctx, "http://127.0.0.1:8080/install.iso"); err != nil {
			t.Fatalf("InsertMedia() = %v", err)
		}
		if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
			t.Fatalf("SetPower(on) = %v", err)
		}
		if got := waitBoot(t, boots); got != bmc.BootCD {
			t.Errorf("boot after InsertMedia = %s, want cd", got)
		}
		for range 2 { // safe to call twice
			if err := d.EjectMedia(ctx); err != nil {
				t.Fatalf("EjectMedia() = %v", err)
			}
		}
		if st := b.State(); st.BootEnabled != "Disabled" || count(st.Calls, "boot:-/Disabled") != 1 {
			t.Errorf("State() after EjectMedia: override %s/%s, calls %v, want it Disabled by one PATCH", st.BootTarget, st.BootEnabled, st.Calls)
		}
		if _, err := d.SetPower(ctx, bmc.PowerReset); err != nil {
			t.Fatalf("SetPower(reset) = %v", err)
		}
		if got := waitBoot(t, boots); got != bmc.BootDisk {
			t.Errorf("boot after EjectMedia = %s, want disk (not the emptied cd)", got)
		}
	})
}

// serve runs h on a loopback port until the test ends and returns its URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDriverBootOverrideNotTaken: a BMC that accepts the override PATCH
// but keeps its old one fails the call with DRIVER_ERROR naming the BMC,
// the asked and the reported override. Before, it was a success.
func TestDriverBootOverrideNotTaken(t *testing.T) {
	t.Parallel()
	b := start(t, Config{})
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			w.WriteHeader(http.StatusNoContent) // accepted, never applied
			return
		}
		b.ServeHTTP(w, r)
	})
	url := serve(t, front) + b.systemPath
	d, _ := loggedDriver(t, url)
	err := d.SetBootDevice(context.Background(), bmc.BootPXE, false)
	if !errs.Is(err, errs.DriverError) {
		t.Fatalf("SetBootDevice(pxe) on a BMC that keeps its override = %v, want DRIVER_ERROR", err)
	}
	wantIn(t, "SetBootDevice(pxe) on a BMC that keeps its override", err, "Pxe/Once", "reports None/Disabled", "would not be pxe")
}
