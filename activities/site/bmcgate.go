package site

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// BMCGate keeps the site agent's conversations with each BMC host (its
// address's host:port, not the node: several nodes can share a chassis
// manager) to one at a time, backs off while a BMC answers that it is busy
// or out of sessions, and holds a circuit breaker per host. Rule while the
// breaker is open: a call fails at once with DRIVER_ERROR naming the BMC,
// since when it is unreachable and its last answer; the first call after
// the cool-down is the one probe (calls are serialized, so there is only
// one), which closes the breaker when the BMC answers and opens it for
// another cool-down when it does not. The activity's retries bring that
// call. Waiting for a turn or a backoff never outlives the call's context,
// so no activity runs past its timeout because of a BMC.
type BMCGate struct {
	cfg   BMCGateConfig
	mu    sync.Mutex
	hosts map[string]*bmcHost
}

// BMCGateConfig holds the gate's knobs; zero fields take the defaults.
type BMCGateConfig struct {
	// Failures is how many transport failures in a row (no answer, a
	// timeout, an HTTP 5xx) open the breaker; DefaultBreakerFailures.
	Failures int
	// CoolDown is how long the breaker stays open before one probe;
	// DefaultBreakerCoolDown.
	CoolDown time.Duration
	// Backoff is the first pause after a busy answer, doubling up to
	// MaxBackoff; DefaultBusyBackoff and DefaultBusyMaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Heartbeat is how often a call heartbeats while it waits or talks,
	// with its BMC's state for the node (metal get); DefaultBMCHeartbeat.
	// It must stay well under the workflows' heartbeat timeout of a BMC
	// call (20 s).
	Heartbeat time.Duration
	// Report, when set, also tells the workflow of the call's activity each
	// change of its BMC's state (its BmcStatus search attribute); it runs
	// apart from the call and its error is only logged.
	Report func(ctx context.Context, workflowID, runID, status string) error
}

// Defaults of BMCGateConfig.
const (
	DefaultBreakerFailures = 3
	DefaultBreakerCoolDown = 30 * time.Second
	DefaultBusyBackoff     = 250 * time.Millisecond
	DefaultBusyMaxBackoff  = 5 * time.Second
	DefaultBMCHeartbeat    = heartbeatEvery // as every site activity that waits
)

// NewBMCGate returns a gate with cfg's knobs.
func NewBMCGate(cfg BMCGateConfig) *BMCGate {
	if cfg.Failures <= 0 {
		cfg.Failures = DefaultBreakerFailures
	}
	if cfg.CoolDown <= 0 {
		cfg.CoolDown = DefaultBreakerCoolDown
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBusyBackoff
	}
	if cfg.MaxBackoff < cfg.Backoff {
		cfg.MaxBackoff = max(DefaultBusyMaxBackoff, cfg.Backoff)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultBMCHeartbeat
	}
	return &BMCGate{cfg: cfg, hosts: map[string]*bmcHost{}}
}

// processGate serves every Activities without a gate of its own: one
// process talks to a BMC one conversation at a time, whoever asks.
var processGate = NewBMCGate(BMCGateConfig{})

func (a *Activities) bmcGate() *BMCGate {
	if a.BMCs != nil {
		return a.BMCs
	}
	return processGate
}

// bmcHost is what the gate knows of one BMC host.
type bmcHost struct {
	name string
	turn chan struct{} // holds a token while a conversation is open

	mu        sync.Mutex
	failures  int       // transport failures in a row
	since     time.Time // the first of them
	last      string    // the BMC's last answer, one line
	openUntil time.Time // the breaker is open before this
}

func (g *BMCGate) host(name string) *bmcHost {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.hosts[name]
	if h == nil {
		h = &bmcHost{name: name, turn: make(chan struct{}, 1)}
		g.hosts[name] = h
	}
	return h
}

// Do runs call, one conversation with BMC host, when its turn comes: it
// fails at once while the host's breaker is open, retries busy answers
// with backoff within ctx, and records how the BMC answered.
func (g *BMCGate) Do(ctx context.Context, host string, call func() error) error {
	h := g.host(host)
	if err := h.open(time.Now()); err != nil {
		return err
	}
	stop := g.heartbeat(ctx, h)
	defer stop()
	select {
	case h.turn <- struct{}{}:
	case <-ctx.Done():
		return errs.Wrap(errs.DriverError, context.Cause(ctx),
			"BMC %s was in conversation with other calls of this site agent until this command's time ran out", host)
	}
	defer func() { <-h.turn }()
	// The breaker may have opened while this call waited its turn.
	if err := h.open(time.Now()); err != nil {
		return err
	}
	return g.converse(ctx, h, call)
}

// converse runs call until the BMC answers anything but busy, pausing
// between busy answers as long as ctx leaves time for another try.
func (g *BMCGate) converse(ctx context.Context, h *bmcHost, call func() error) error {
	pause := g.cfg.Backoff
	for {
		began := time.Now()
		err := call()
		switch answerOf(err) {
		case answered:
			h.answered()
			return err
		case unreachable:
			return h.failed(err, began, time.Now(), g.cfg)
		case busy:
			h.answered() // a busy BMC is reachable
			if !sleep(ctx, pause) {
				return err
			}
			pause = min(2*pause, g.cfg.MaxBackoff)
		default: // our own context ended: says nothing of the BMC
			return err
		}
	}
}

// sleep waits d unless ctx ends first or has less than d left; it reports
// whether the full pause was taken.
func sleep(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// open returns the fail-fast error while h's breaker is open at now.
func (h *bmcHost) open(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !now.Before(h.openUntil) {
		return nil
	}
	return errs.New(errs.DriverError, "%s (the site agent sends it nothing until %s, then tries once)",
		h.statusLocked(), stamp(h.openUntil))
}

func (h *bmcHost) answered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures, h.since, h.last, h.openUntil = 0, time.Time{}, "", time.Time{}
}

// failed records a transport failure of a call begun at began, opens the
// breaker at the cfg.Failures-th in a row (again after a failed probe), and
// returns err as the node shows it.
func (h *bmcHost) failed(err error, began, now time.Time, cfg BMCGateConfig) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures == 0 {
		h.since = began
	}
	h.failures++
	h.last = answerText(err)
	if h.failures >= cfg.Failures {
		h.openUntil = now.Add(cfg.CoolDown)
	}
	// The status quotes the answer already: no cause, so it is said once.
	return errs.New(errs.DriverError, "%s", h.statusLocked())
}

// status is "BMC H unreachable since T: <last answer>" while h fails, ""
// while it answers.
func (h *bmcHost) status() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures == 0 {
		return ""
	}
	return h.statusLocked()
}

func (h *bmcHost) statusLocked() string {
	return fmt.Sprintf("BMC %s unreachable since %s: %s", h.name, stamp(h.since), h.last)
}

// stamp is a time as the node shows it, "17:02:11Z".
func stamp(t time.Time) string { return t.UTC().Format("15:04:05Z") }

// heartbeat reports h's status to the activity at once when it changed,
// so the node shows a failing BMC (metal get) before the call ends, and
// every cfg.Heartbeat while the call waits or talks, changed or not: the
// workflows give a BMC call a heartbeat timeout, so a site agent that died
// under one is found out and the call retried long before its
// start-to-close. Only a change is told to the workflow (cfg.Report).
// Outside an activity it does nothing.
func (g *BMCGate) heartbeat(ctx context.Context, h *bmcHost) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	// An earlier attempt may have reported the BMC failing: a change,
	// recovery included, is reported, so the node never shows a stale one.
	var last kinds.Progress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &last)
	}
	shown := last.BMC
	beat := func(always bool) {
		s := h.status()
		if s == shown && !always {
			return
		}
		activity.RecordHeartbeat(ctx, kinds.Progress{BMC: s}) // the SDK sends at most one a heartbeat timeout's 0.8
		if s != shown {
			g.report(ctx, s)
			shown = s
		}
	}
	beat(false)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(g.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat(true)
			}
		}
	}()
	return func() { close(done) }
}

// report hands status to cfg.Report for the activity's workflow run, apart
// from the call: the BMC conversation never waits on the control plane.
func (g *BMCGate) report(ctx context.Context, status string) {
	if g.cfg.Report == nil {
		return
	}
	info := activity.GetInfo(ctx)
	wid, rid := info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	log := activity.GetLogger(ctx)
	go func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := g.cfg.Report(rctx, wid, rid, status); err != nil {
			log.Warn("cannot report the BMC's status to its workflow", "workflow", wid, "err", err)
		}
	}()
}

// answerText is what the BMC answered, without the operation and kind.
func answerText(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		if e.Err != nil {
			return e.Msg + ": " + e.Err.Error()
		}
		return e.Msg
	}
	return err.Error()
}

// gated runs fn through the gate of addr's host. The drivers' factories do
// not contact the BMC, so the conversation is fn.
func (a *Activities) gated(ctx context.Context, addr bmc.Address, fn func(bmc.Driver) error) func(bmc.Driver) error {
	host := strings.ToLower(addr.HostPort())
	return func(d bmc.Driver) error {
		return a.bmcGate().Do(ctx, host, func() error { return fn(d) })
	}
}

// ParseBMCGate checks bcd site's breaker flags: INVALID_INPUT naming the
// flag for a count below 1 or a cool-down that is not positive.
func ParseBMCGate(failures int, coolDown time.Duration) (BMCGateConfig, error) {
	if failures < 1 {
		return BMCGateConfig{}, errs.Invalid("bmc-breaker-failures", "%d: give at least 1", failures)
	}
	if coolDown <= 0 {
		return BMCGateConfig{}, errs.Invalid("bmc-breaker-cooldown", "%v: give a positive duration, e.g. 30s", coolDown)
	}
	return BMCGateConfig{Failures: failures, CoolDown: coolDown}, nil
}
