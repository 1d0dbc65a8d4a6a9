package bmc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// script is a BMC whose power reads return states in turn (the last one
// forever) and remember when they were made.
type script struct {
	states []PowerState
	at     []time.Time
}

func (s *script) read(context.Context) (PowerState, error) {
	s.at = append(s.at, time.Now())
	st := s.states[0]
	if len(s.states) > 1 {
		s.states = s.states[1:]
	}
	return st, nil
}

func TestAwaitBacksOff(t *testing.T) {
	t.Parallel()
	s := &script{states: []PowerState{On, On, On, On, Off}}
	tr := Confirm{Timeout: 5 * time.Second, First: 20 * time.Millisecond, Max: 50 * time.Millisecond}.Track("bmc-1:623", s.read)
	if err := tr.Await(context.Background(), Off, "power down"); err != nil {
		t.Fatalf("Await(off) = %v, want nil", err)
	}
	want := []time.Duration{20, 40, 50, 50} // doubled, capped at Max
	for i, w := range want {
		gap := s.at[i+1].Sub(s.at[i])
		if w *= time.Millisecond; gap < w || gap > w+40*time.Millisecond {
			t.Errorf("pause before read %d = %v, want %v", i+2, gap, w)
		}
	}
	if res := tr.Result(); res.State != Off || res.Reads != 5 || res.Took < 160*time.Millisecond {
		t.Errorf("Result() = %+v, want off after 5 reads and ≥ 160ms", res)
	}
}

func TestSettledWaitsOutTransitions(t *testing.T) {
	t.Parallel()
	s := &script{states: []PowerState{"PoweringOn", "PoweringOn", On}}
	tr := Confirm{First: time.Millisecond}.Track("bmc-1", s.read)
	if st, err := tr.Settled(context.Background()); st != On || err != nil || len(s.at) != 3 {
		t.Errorf("Settled() = %q, %v after %d reads, want on after 3", st, err, len(s.at))
	}
}

func TestAwaitTimesOut(t *testing.T) {
	t.Parallel()
	s := &script{states: []PowerState{On}}
	const bound = 300 * time.Millisecond
	tr := Confirm{Timeout: bound, First: 10 * time.Millisecond, Max: 100 * time.Millisecond}.Track("bmc-7.example:623", s.read)
	start := time.Now()
	err := tr.Await(context.Background(), Off, "Chassis Control power down")
	took := time.Since(start)
	if !errs.Is(err, errs.DriverError) {
		t.Fatalf("Await(off) on a BMC that stays on = %v, want DRIVER_ERROR", err)
	}
	for _, w := range []string{"bmc-7.example:623", `"on"`, "reach power off after Chassis Control power down", "300ms"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Await(off) = %q, want it to name %q", err, w)
		}
	}
	if took < bound || took > bound+100*time.Millisecond {
		t.Errorf("Await(off) gave up after %v, want %v", took, bound)
	}
	if res := tr.Result(); res.State != On {
		t.Errorf("Result().State = %q, want the last state read, on", res.State)
	}
}

func TestAwaitStopsOnReadErrorAndCancel(t *testing.T) {
	t.Parallel()
	boom := errs.New(errs.Unauthenticated, "session expired")
	reads := 0
	tr := Confirm{}.Track("b", func(context.Context) (PowerState, error) { reads++; return "", boom })
	if err := tr.Await(context.Background(), On, "x"); !errors.Is(err, boom) || reads != 1 {
		t.Errorf("Await with a failing read = %v after %d reads, want %v after 1", err, reads, boom)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr = Confirm{First: time.Hour}.Track("b", func(context.Context) (PowerState, error) { cancel(); return Off, nil })
	if err := tr.Await(ctx, On, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Await canceled = %v, want context.Canceled", err)
	}
}
