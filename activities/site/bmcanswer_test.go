package site

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// TestAnswerOfReasonNotText: the gate reads a driver error's reason, not
// its message: a reworded message with the reason is busy or unreachable,
// and the drivers' old texts (and causes) without a reason are answers.
func TestAnswerOfReasonNotText(t *testing.T) {
	t.Parallel()
	wrapped := func(e *errs.Error) error { return fmt.Errorf("power.setPower: %w", e.WithOp("power.setPower")) }
	for _, tt := range []struct {
		name string
		err  error
		want answer
	}{
		{"reworded, busy", errs.New(errs.DriverError, "BMC b:443 says: come back later").WithReason(bmc.ReasonBusy), busy},
		{"reworded, unreachable", errs.New(errs.DriverError, "BMC b:623 is silent").WithReason(bmc.ReasonUnreachable), unreachable},
		{"reason under another layer", wrapped(errs.New(errs.DriverError, "gone").WithReason(bmc.ReasonUnreachable)), unreachable},
		{"old 503 text", errs.New(errs.DriverError, "BMC b:443 answered HTTP 503 Service Unavailable"), answered},
		{"old session text", errs.New(errs.DriverError, "BMC b:623 has no free session: wait"), answered},
		{"old timeout text", errs.New(errs.DriverError, "BMC b:623 did not answer in time: check"), answered},
		{"old refused text and cause", errs.Wrap(errs.DriverError, syscall.ECONNREFUSED, "cannot reach BMC b:623"), answered},
		{"busy completion code", errs.Wrap(errs.DriverError, types.NewResponseError(types.CodeNodeBusy, ""), "IPMI LAN: x"), answered},
		{"canceled", errs.Wrap(errs.DriverError, context.Canceled, "canceled").WithReason(bmc.ReasonUnreachable), ownContext},
		{"nil", nil, answered},
	} {
		if got := answerOf(tt.err); got != tt.want {
			t.Errorf("answerOf(%s: %v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestBMCGateBreakerByReason: three failures with a reworded message but
// the unreachable reason open the breaker; three with the old "did not
// answer in time" text but no reason leave it closed, and a busy reason
// under a new wording is asked again after a backoff.
func TestBMCGateBreakerByReason(t *testing.T) {
	t.Parallel()
	g := NewBMCGate(BMCGateConfig{Failures: 3, CoolDown: time.Minute, Backoff: 10 * time.Millisecond})
	ctx := context.Background()
	reworded := func() error {
		return errs.New(errs.DriverError, "BMC a:623 stayed silent").WithReason(bmc.ReasonUnreachable)
	}
	oldText := func() error {
		return errs.New(errs.DriverError, "BMC b:623 did not answer in time: check that it is up")
	}
	for range 3 {
		_ = g.Do(ctx, "a:623", reworded)
		_ = g.Do(ctx, "b:623", oldText)
	}
	if got := g.Breakers(time.Now()); got[BreakerOpen] != 1 || got[BreakerClosed] != 1 {
		t.Errorf("Breakers() after 3 reworded failures with the reason and 3 old texts without = %v, want 1 open, 1 closed", got)
	}
	calls := 0
	err := g.Do(ctx, "c:443", func() error {
		if calls++; calls < 3 {
			return errs.New(errs.DriverError, "BMC c:443 asks for patience").WithReason(bmc.ReasonBusy)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Do(busy twice, then ok) = %v after %d calls, want nil after 3", err, calls)
	}
}
