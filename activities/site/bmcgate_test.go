package site

import (
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

func TestParseBMCGate(t *testing.T) {
	if got, err := ParseBMCGate(5, time.Minute); err != nil || got.Failures != 5 || got.CoolDown != time.Minute {
		t.Errorf("ParseBMCGate(5, 1m) = %+v, %v; want 5, 1m", got, err)
	}
	for _, tt := range []struct {
		failures int
		coolDown time.Duration
		field    string
	}{{0, time.Minute, "bmc-breaker-failures"}, {3, 0, "bmc-breaker-cooldown"}, {3, -time.Second, "bmc-breaker-cooldown"}} {
		_, err := ParseBMCGate(tt.failures, tt.coolDown)
		if e, ok := err.(*errs.Error); !ok || e.Kind != errs.InvalidInput || e.Field != tt.field {
			t.Errorf("ParseBMCGate(%d, %v) = %v, want INVALID_INPUT %s", tt.failures, tt.coolDown, err, tt.field)
		}
	}
}
