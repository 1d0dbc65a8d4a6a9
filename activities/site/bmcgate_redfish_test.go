package site

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// redfishFront serves an emulated Redfish BMC and counts the sessions it
// holds at once. With busy > 0 it answers that many logins 503 with the
// DMTF SessionLimitExceeded message; down, it closes every connection
// unanswered: a BMC that stops answering; hanging, it keeps every request
// unanswered until the client gives up.
type redfishFront struct {
	b    *redfishbmc.BMC
	addr string // the system's address, as enrolled
	busy atomic.Int32
	down atomic.Bool
	hang atomic.Bool // answer nothing until the client gives up

	mu   sync.Mutex
	high int
}

const sessionLimit = `{"error":{"code":"Base.1.8.SessionLimitExceeded","message":"The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.",` +
	`"@Message.ExtendedInfo":[{"MessageId":"Base.1.8.SessionLimitExceeded","Message":"The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation."}]}}`

func startRedfishFront(t testing.TB) *redfishFront {
	t.Helper()
	b, err := redfishbmc.New(redfishbmc.Config{Username: "admin", Password: "s3cret", MACs: testMACs})
	if err != nil {
		t.Fatalf("redfishbmc.New() = %v", err)
	}
	own, err := net.Listen("tcp", "127.0.0.1:0") // the BMC's own, only for its paths
	if err != nil {
		t.Fatal(err)
	}
	b.Start(own)
	t.Cleanup(func() { b.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &redfishFront{b: b, addr: "http://" + ln.Addr().String() + strings.TrimPrefix(b.SystemURL(), b.URL())}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return f
}

func (f *redfishFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.hang.Load() {
		<-r.Context().Done()
		return
	}
	if f.down.Load() {
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	if r.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/Sessions") && f.busy.Add(-1) >= 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(sessionLimit))
		return
	}
	f.b.ServeHTTP(w, r)
	n := f.b.State().Sessions // a login's session is open until its logout, after this
	f.mu.Lock()
	f.high = max(f.high, n)
	f.mu.Unlock()
}

func (f *redfishFront) highWater() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.high
}

const redfishCredsRef = "env://BCD_SECRET_BMC_CREDS"

func redfishActivities(gate *BMCGate) *Activities {
	return &Activities{
		Drivers:   map[string]DriverFactory{bmc.DriverRedfish: redfishFactory},
		LookupEnv: envLookup(map[string]string{"BCD_SECRET_BMC_CREDS": "admin:s3cret"}),
		BMCs:      gate,
	}
}

// TestBMCGateOneSessionRedfish: 20 nodes behind one emulated Redfish BMC
// all get their power on, one session at a time at the BMC: one login,
// its session kept from each call to the next.
func TestBMCGateOneSessionRedfish(t *testing.T) {
	t.Parallel()
	f := startRedfishFront(t)
	a := redfishActivities(NewBMCGate(BMCGateConfig{}))
	for i, err := range manyNodes(a, 20, f.addr, bmc.DriverRedfish, redfishCredsRef) {
		if err != nil {
			t.Errorf("node %d: power.setPower(on) = %v, want nil", i, err)
		}
	}
	if got := f.highWater(); got != 1 {
		t.Errorf("sessions open at once at the BMC = %d, want 1", got)
	}
	if st := f.b.State(); st.Power != bmc.On || st.Logins != 1 {
		t.Errorf("BMC power %s after %d logins, want on after 1", st.Power, st.Logins)
	}
}

// TestBMCGateSessionLimitRedfish: a BMC that answers its first three
// logins 503 SessionLimitExceeded gets the power action after backoff.
func TestBMCGateSessionLimitRedfish(t *testing.T) {
	t.Parallel()
	f := startRedfishFront(t)
	f.busy.Store(3)
	a := redfishActivities(NewBMCGate(BMCGateConfig{Backoff: 50 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := powerOn(ctx, a, "node_1", f.addr, bmc.DriverRedfish, redfishCredsRef); err != nil {
		t.Fatalf("power.setPower(on) after three 503 SessionLimitExceeded = %v, want nil after backoff", err)
	}
	if left, st := f.busy.Load(), f.b.State(); left >= 0 || st.Power != bmc.On {
		t.Errorf("busy answers left %d, BMC power %s; want all three served and power on", left, st.Power)
	}
}

// TestBMCGateBreakerRedfish runs power.setPower as an activity against a
// BMC that stops answering: each failure says "BMC H unreachable since T",
// the next attempt's first heartbeat shows it before it talks to the BMC,
// the breaker opens after three, a call then fails in under 100 ms, and the
// probe after the cool-down closes it once the BMC answers again.
func TestBMCGateBreakerRedfish(t *testing.T) {
	t.Parallel()
	f := startRedfishFront(t)
	const coolDown = 300 * time.Millisecond
	a := redfishActivities(NewBMCGate(BMCGateConfig{Failures: 3, CoolDown: coolDown}))
	env := testEnv(t, a)
	var beats []string
	var mu sync.Mutex
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p kinds.Progress
		if d.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p.BMC)
			mu.Unlock()
		}
	})
	host := strings.TrimPrefix(strings.Split(f.addr, "/redfish")[0], "http://")
	power := func() error {
		_, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{Action: bmc.PowerOn,
			BMC: kinds.BMCTarget{NodeID: "node_1", Address: f.addr, Driver: bmc.DriverRedfish, CredentialsRef: redfishCredsRef}})
		return err
	}
	if err := power(); err != nil {
		t.Fatalf("power.setPower(on) = %v", err)
	}

	f.down.Store(true)
	want := "BMC " + host + " unreachable since "
	for i := 1; i <= 3; i++ {
		if err := power(); errs.FromTemporal(err) != errs.DriverError || !strings.Contains(err.Error(), want) {
			t.Fatalf("call %d to a silent BMC = %v, want DRIVER_ERROR %s…", i, err, want)
		}
	}
	mu.Lock()
	if len(beats) == 0 || !strings.HasPrefix(beats[0], want) {
		t.Errorf("heartbeats of the calls after the first failure = %q, want the first to start %q", beats, want)
	}
	mu.Unlock()
	start := time.Now()
	err := power()
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("call with the breaker open took %v, want < 100ms", took)
	}
	if errs.FromTemporal(err) != errs.DriverError || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cannot reach BMC") {
		t.Errorf("call with the breaker open = %v, want DRIVER_ERROR %s… with the BMC's last answer", err, want)
	}

	f.down.Store(false)
	time.Sleep(coolDown)
	if err := power(); err != nil {
		t.Errorf("the probe after the BMC came back = %v, want nil", err)
	}
	if err := power(); err != nil {
		t.Errorf("the call after the probe = %v, want nil", err)
	}
}

// TestBMCCallHeartbeatsWhileTheBMCIsSilent: a BMC call heartbeats every
// BMCGateConfig.Heartbeat while it waits on a BMC that answers nothing, its
// state unchanged (it has not failed yet): the workflows give a BMC call a
// heartbeat timeout, which a call that heartbeats only on a change would
// run out, and a site agent that dies under a call is found out by it.
func TestBMCCallHeartbeatsWhileTheBMCIsSilent(t *testing.T) {
	t.Parallel()
	f := startRedfishFront(t)
	f.hang.Store(true)
	a := redfishActivities(NewBMCGate(BMCGateConfig{Heartbeat: 50 * time.Millisecond}))
	env := testEnv(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	var beats atomic.Int32
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	_, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{Action: bmc.PowerOn,
		BMC: kinds.BMCTarget{NodeID: "node_1", Address: f.addr, Driver: bmc.DriverRedfish, CredentialsRef: redfishCredsRef}})
	if err == nil {
		t.Fatal("power.setPower against a BMC that answers nothing = nil, want an error when its time runs out")
	}
	if n := beats.Load(); n < 1 {
		t.Errorf("heartbeats in 600 ms of a call waiting on a silent BMC, one due every 50 ms = %d, want some (the SDK throttles them)", n)
	}
}

// TestBMCGateWaitIsBounded: a call waiting its turn behind a conversation
// that hangs gives up when its own time runs out, not the hung call's, and
// says why.
func TestBMCGateWaitIsBounded(t *testing.T) {
	t.Parallel()
	f := startRedfishFront(t)
	f.hang.Store(true)
	a := redfishActivities(NewBMCGate(BMCGateConfig{}))
	hung, cancelHung := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelHung()
	go func() { _ = powerOn(hung, a, "node_1", f.addr, bmc.DriverRedfish, redfishCredsRef) }()
	time.Sleep(100 * time.Millisecond) // node_1's call holds the turn
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := powerOn(ctx, a, "node_2", f.addr, bmc.DriverRedfish, redfishCredsRef)
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("waiting behind a hung call took %v, want its own 300ms", took)
	}
	if errs.KindOf(err) != errs.DriverError || !strings.Contains(err.Error(), "until this command's time ran out") {
		t.Errorf("waiting behind a hung call = %v, want DRIVER_ERROR saying the command's time ran out", err)
	}
}

// TestBMCGateRefusalsKeepBreakerClosed: a wrong password, refused again
// and again, is the BMC answering: each call is UNAUTHENTICATED from the
// BMC itself, never the breaker's fail-fast DRIVER_ERROR.
func TestBMCGateRefusalsKeepBreakerClosed(t *testing.T) {
	t.Parallel()
	f := startRedfishFront(t)
	a := redfishActivities(NewBMCGate(BMCGateConfig{Failures: 2}))
	a.LookupEnv = envLookup(map[string]string{"BCD_SECRET_BMC_CREDS": "admin:not-it"})
	for i := range 4 {
		err := powerOn(context.Background(), a, "node_1", f.addr, bmc.DriverRedfish, redfishCredsRef)
		if errs.FromTemporal(err) != errs.Unauthenticated {
			t.Fatalf("call %d with a wrong password = %v, want UNAUTHENTICATED", i, err)
		}
	}
	if got := f.b.State().FailedLogins; got != 4 {
		t.Errorf("logins refused at the BMC = %d, want 4 (one a call)", got)
	}
}
