package site

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// TestBMCGateBreakers: the gate counts its BMC hosts per breaker state: one
// that answers closed, one that failed once (of two) failing, one that
// failed twice open, and half-open once its cool-down has passed.
func TestBMCGateBreakers(t *testing.T) {
	t.Parallel()
	g := NewBMCGate(BMCGateConfig{Failures: 2, CoolDown: time.Minute})
	ctx := context.Background()
	ok := func() error { return nil }
	refused := func() error {
		return errs.Wrap(errs.DriverError, syscall.ECONNREFUSED, "cannot reach BMC").WithReason(bmc.ReasonUnreachable)
	}
	_ = g.Do(ctx, "a:443", ok)
	_ = g.Do(ctx, "b:443", refused)
	_ = g.Do(ctx, "c:443", refused)
	_ = g.Do(ctx, "c:443", refused)
	now := time.Now()
	if diff := cmp.Diff(map[string]int{"closed": 1, "failing": 1, "open": 1, "half-open": 0}, g.Breakers(now)); diff != "" {
		t.Errorf("Breakers(now) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"closed": 1, "failing": 1, "open": 0, "half-open": 1}, g.Breakers(now.Add(2*time.Minute))); diff != "" {
		t.Errorf("Breakers(after the cool-down) (-want +got):\n%s", diff)
	}
	_ = g.Do(ctx, "b:443", ok)
	if got := g.Breakers(now)["closed"]; got != 2 {
		t.Errorf("Breakers(now)[closed] after b answered = %d, want 2", got)
	}
}
