package bmc

import (
	"context"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// PowerResult is what a power action reached, as the BMC reported it.
type PowerResult struct {
	State PowerState    // the state the BMC reported last: the one the action asked for
	Took  time.Duration // from the action's start to the BMC reporting that state
	Reads int           // power state reads it took
}

// Default bounds of Confirm. The whole action, requests and waits, must fit
// in the site activity's two minutes with room for a slow BMC's answers.
const (
	DefaultConfirmTimeout = 90 * time.Second
	defaultFirstPause     = 100 * time.Millisecond
	defaultMaxPause       = 2 * time.Second
)

// Confirm says how a driver waits for its BMC to report the power state an
// action asked for. BMCs accept a power request and apply it later (seconds
// on real hardware), so every action reads the state back until it matches,
// pausing First, then twice as long each time up to Max, for at most Timeout
// from the action's start. Zero values take the defaults.
type Confirm struct {
	Timeout time.Duration
	First   time.Duration
	Max     time.Duration
}

// Tracker follows one power action on one BMC: the reads it made and since
// when. It is not safe for concurrent use.
type Tracker struct {
	bmc      string
	read     func(context.Context) (PowerState, error)
	first    time.Duration
	max      time.Duration
	start    time.Time
	deadline time.Time
	last     PowerState
	reads    int
}

// Track starts an action on the BMC named bmcName (it names the BMC in
// errors). read returns On or Off when the BMC reports a settled state, and
// anything else (the BMC's own word, e.g. "PoweringOn") while in transition.
func (c Confirm) Track(bmcName string, read func(context.Context) (PowerState, error)) *Tracker {
	t := &Tracker{bmc: bmcName, read: read, first: c.First, max: c.Max, start: time.Now()}
	if t.first <= 0 {
		t.first = defaultFirstPause
	}
	if t.max < t.first {
		t.max = max(defaultMaxPause, t.first)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultConfirmTimeout
	}
	t.deadline = t.start.Add(timeout)
	return t
}

// Deadline is when the action's time is up.
func (t *Tracker) Deadline() time.Time { return t.deadline }

// Settled reads the state, waiting out a transition, so the action is
// planned on a state the BMC has reached.
func (t *Tracker) Settled(ctx context.Context) (PowerState, error) {
	return t.poll(ctx, func(s PowerState) bool { return s == On || s == Off }, "report a settled power state")
}

// Await reads the state until the BMC reports want. asked names the
// request that should bring it there, for the error when it does not.
func (t *Tracker) Await(ctx context.Context, want PowerState, asked string) error {
	_, err := t.poll(ctx, func(s PowerState) bool { return s == want }, "reach power "+string(want)+" after "+asked)
	return err
}

// Result returns what the action reached so far.
func (t *Tracker) Result() PowerResult {
	return PowerResult{State: t.last, Took: time.Since(t.start), Reads: t.reads}
}

// poll reads until ok holds, with backoff, until the deadline. A failed
// read ends it with that error; the context's end with the context's error.
func (t *Tracker) poll(ctx context.Context, ok func(PowerState) bool, goal string) (PowerState, error) {
	pause := t.first
	for {
		st, err := t.read(ctx)
		t.reads++
		if err != nil {
			return "", err
		}
		t.last = st
		if ok(st) {
			return st, nil
		}
		left := time.Until(t.deadline)
		if left <= 0 {
			return st, errs.New(errs.DriverError,
				"BMC %s did not %s within %s: it still reports power %q (read %d times); check the machine and its BMC, then retry",
				t.bmc, goal, t.deadline.Sub(t.start).Round(time.Millisecond), st, t.reads)
		}
		timer := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			timer.Stop()
			return st, ctx.Err()
		case <-timer.C:
		}
		pause = min(2*pause, t.max)
	}
}
