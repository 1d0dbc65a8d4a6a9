package site

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// The site's behaviour against an emulated Redfish BMC's faults
// (redfishbmc.Faults), through the activities and the BMC gate.

// faultyBMC runs an emulated Redfish BMC (admin/s3cret) with faults f,
// and without PowerCycle: a BMC's own cycle of a machine that is on reads
// on before and after, so only off, on shows the late power at work.
func faultyBMC(t *testing.T, f redfishbmc.Faults) (*redfishbmc.BMC, kinds.BMCTarget) {
	t.Helper()
	b, err := redfishbmc.New(redfishbmc.Config{Username: "admin", Password: "s3cret", MACs: testMACs,
		ResetTypes: []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart"}})
	if err != nil {
		t.Fatalf("redfishbmc.New() = %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.Start(ln)
	t.Cleanup(func() { b.Close() })
	b.SetFaults(f)
	return b, kinds.BMCTarget{NodeID: "node_1", Address: b.SystemURL(), Driver: bmc.DriverRedfish, CredentialsRef: redfishCredsRef}
}

// powerWithRetries runs power.setPower as a workflow does, with the retry
// policy of a site command (workflows' siteOptions).
func powerWithRetries(ctx workflow.Context, in kinds.SetPowerInput) (kinds.SetPowerOutput, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 8, NonRetryableErrorTypes: errs.FinalKinds()},
	})
	var out kinds.SetPowerOutput
	err := workflow.ExecuteActivity(ctx, kinds.PowerSetPower, in).Get(ctx, &out)
	return out, err
}

// TestRedfish500BurstIsRetried: a BMC answering its next two requests 500
// fails two attempts of power.setPower (DRIVER_ERROR, retryable, under the
// breaker's three), and the activity's retry brings the third to success.
// This passes without a change: the gate and the retry policy handled it.
func TestRedfish500BurstIsRetried(t *testing.T) {
	t.Parallel()
	b, target := faultyBMC(t, redfishbmc.Faults{Fail500: 2})
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	if err := redfishActivities(NewBMCGate(BMCGateConfig{})).Register(env, nil); err != nil {
		t.Fatal(err)
	}
	env.RegisterWorkflow(powerWithRetries)
	var attempts atomic.Int32
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { attempts.Add(1) })
	env.ExecuteWorkflow(powerWithRetries, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn})
	var out kinds.SetPowerOutput
	if err := env.GetWorkflowResult(&out); err != nil || out.PowerState != bmc.On {
		t.Fatalf("power.setPower(on) retried over a burst of two 500s = %+v, %v, want on", out, err)
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("attempts = %d, want 3 (two 500s, then success)", n)
	}
	if st := b.State(); st.Power != bmc.On || st.Logins != 1 {
		t.Errorf("BMC power, logins = %s, %d, want on, 1", st.Power, st.Logins)
	}
}

// TestRedfish500ForeverOpensBreaker: a BMC answering every request 500 gives
// DRIVER_ERROR naming it and its answer at each of three calls, which open
// the breaker: the fourth fails in under 100 ms without reaching the BMC,
// saying since when it fails and its last answer. This passes without a
// change: the gate counted 5xx as failures already.
func TestRedfish500ForeverOpensBreaker(t *testing.T) {
	t.Parallel()
	b, target := faultyBMC(t, redfishbmc.Faults{Always500: true})
	a := redfishActivities(NewBMCGate(BMCGateConfig{Failures: 3, CoolDown: time.Minute}))
	env := testEnv(t, a)
	power := func() error {
		_, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{Action: bmc.PowerOn, BMC: target})
		return err
	}
	host := strings.TrimPrefix(b.URL(), "http://")
	for i := 1; i <= 3; i++ {
		err := power()
		if errs.FromTemporal(err) != errs.DriverError || !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), "HTTP 500") {
			t.Fatalf("call %d to a BMC answering 500 = %v, want DRIVER_ERROR naming %s and its HTTP 500", i, err, host)
		}
	}
	b.SetFaults(redfishbmc.Faults{}) // it would answer now: the breaker must not ask it
	start := time.Now()
	err := power()
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("call with the breaker open took %v, want < 100ms", took)
	}
	for _, w := range []string{"BMC " + host + " unreachable since ", "HTTP 500", "sends it nothing until"} {
		if errs.FromTemporal(err) != errs.DriverError || !strings.Contains(err.Error(), w) {
			t.Errorf("call with the breaker open = %v, want DRIVER_ERROR with %q", err, w)
		}
	}
	if st := b.State(); st.Power != bmc.Off || st.Logins != 0 {
		t.Errorf("BMC power, logins = %s, %d, want off, 0 (nothing got through)", st.Power, st.Logins)
	}
}

// holdSession logs in at b as another client would and returns its logout.
func holdSession(t *testing.T, b *redfishbmc.BMC) (logout func()) {
	t.Helper()
	body := strings.NewReader(`{"UserName":"admin","Password":"s3cret"}`)
	resp, err := http.Post(b.URL()+"/redfish/v1/SessionService/Sessions", "application/json", body)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("login = %v, %v, want 201", resp, err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	return func() {
		req, _ := http.NewRequest(http.MethodDelete, b.URL()+loc, nil)
		req.SetBasicAuth("admin", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Errorf("logout = %v, %v, want 204", resp, err)
			return
		}
		resp.Body.Close()
	}
}

// TestRedfishSessionLimitBackoff: a BMC whose one session is taken answers
// the call's logins 503 SessionLimitExceeded; the gate backs off and the
// call succeeds once the other client logs out, 300 ms later. This passes
// without a change (the gate's busy backoff), now against the emulated
// BMC's own session limit rather than a front that fakes the answer.
func TestRedfishSessionLimitBackoff(t *testing.T) {
	t.Parallel()
	b, target := faultyBMC(t, redfishbmc.Faults{SessionLimit: 1})
	logout := holdSession(t, b)
	time.AfterFunc(300*time.Millisecond, logout)
	a := redfishActivities(NewBMCGate(BMCGateConfig{Backoff: 50 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := a.SetPower(ctx, kinds.SetPowerInput{Action: bmc.PowerOn, BMC: target}); err != nil {
		t.Fatalf("power.setPower(on) while the session is taken for 300ms = %v, want nil after backoff", err)
	}
	took := time.Since(start)
	st := b.State()
	t.Logf("power on behind a session held 300ms: %v, %d logins refused for the limit", took, st.SessionLimited)
	if st.Power != bmc.On || st.SessionLimited < 2 || took < 300*time.Millisecond {
		t.Errorf("BMC power %s after %d limited logins and %v, want on after ≥ 2 and ≥ 300ms", st.Power, st.SessionLimited, took)
	}
}

// TestRedfishSessionLimitNeverFrees: when the session is never freed the
// call backs off until its context is nearly out and fails with
// DRIVER_ERROR naming the BMC and the session limit, within its time.
// This passes without a change.
func TestRedfishSessionLimitNeverFrees(t *testing.T) {
	t.Parallel()
	b, target := faultyBMC(t, redfishbmc.Faults{SessionLimit: 1})
	holdSession(t, b)
	a := redfishActivities(NewBMCGate(BMCGateConfig{Backoff: 50 * time.Millisecond}))
	const budget = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	_, err := a.SetPower(ctx, kinds.SetPowerInput{Action: bmc.PowerOn, BMC: target})
	took := time.Since(start)
	t.Logf("power on with the session limit never freed, given %v: failed after %v, %d logins refused", budget, took, b.State().SessionLimited)
	host := strings.TrimPrefix(b.URL(), "http://")
	if errs.FromTemporal(err) != errs.DriverError || took > budget {
		t.Errorf("power.setPower(on) = %v after %v, want DRIVER_ERROR within %v", err, took, budget)
	}
	for _, w := range []string{host, "HTTP 503", "exceeding the limit"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("power.setPower(on) = %v, want it to name %q", err, w)
		}
	}
	if n := b.State().SessionLimited; n < 3 {
		t.Errorf("logins refused for the limit = %d, want ≥ 3 (the gate backs off and asks again)", n)
	}
}

// TestRedfishSlowBMCBoundedThroughGate: a BMC taking 500 ms for each answer
// cannot keep power.setPower past its 1.2 s: the call fails with
// DRIVER_ERROR within it, and the next one too. Before, the call's logout
// held it (and the BMC's turn at the gate) 500 ms past its context.
func TestRedfishSlowBMCBoundedThroughGate(t *testing.T) {
	t.Parallel()
	_, target := faultyBMC(t, redfishbmc.Faults{Slow: 500 * time.Millisecond})
	a := redfishActivities(NewBMCGate(BMCGateConfig{}))
	const budget = 1200 * time.Millisecond
	for i := 1; i <= 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		start := time.Now()
		_, err := a.SetPower(ctx, kinds.SetPowerInput{Action: bmc.PowerOn, BMC: target})
		took := time.Since(start)
		cancel()
		t.Logf("call %d to a BMC answering in 500ms, given %v: %v", i, budget, took)
		if errs.FromTemporal(err) != errs.DriverError || took > budget+200*time.Millisecond {
			t.Errorf("call %d = %v after %v, want DRIVER_ERROR within %v (+200ms)", i, err, took, budget)
		}
	}
}

// TestRedfishLatePowerOnReadRecorded: against a BMC whose power lands
// 200 ms late and only when the system is read, power.setPower returns once
// the BMC reports the state, and its result records how long that took and
// the reads it made. This passes without a change: the driver's
// confirmation (bmc/confirm.go) polls by reading.
func TestRedfishLatePowerOnReadRecorded(t *testing.T) {
	t.Parallel()
	b, target := faultyBMC(t, redfishbmc.Faults{PowerOnRead: true, PowerLateMin: 200 * time.Millisecond, PowerLateMax: 200 * time.Millisecond})
	env := testEnv(t, redfishActivities(NewBMCGate(BMCGateConfig{})))
	for _, s := range []struct {
		action bmc.PowerAction
		want   bmc.PowerState
		late   int64 // ms: each Reset lands 200 ms late
	}{{bmc.PowerOn, bmc.On, 200}, {bmc.PowerCycle, bmc.On, 400}, {bmc.PowerOff, bmc.Off, 200}} {
		v, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{Action: s.action, BMC: target})
		if err != nil {
			t.Fatalf("power.setPower(%s) = %v", s.action, err)
		}
		var out kinds.SetPowerOutput
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		t.Logf("power.setPower(%s) = %+v", s.action, out)
		if got := b.State().Power; out.PowerState != s.want || got != s.want || out.ConfirmedMs < s.late || out.PowerReads < 2 {
			t.Errorf("power.setPower(%s) = %+v, BMC power %s, want %s confirmed after ≥ %dms and ≥ 2 reads", s.action, out, got, s.want, s.late)
		}
	}
}
