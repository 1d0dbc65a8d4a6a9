package demo

import (
	"testing"
	"time"
)

// The demo's own polls stay near 200 requests a second however many
// machines it runs (two requests a poll, MaxInFlight machines at a time),
// and a few machines are still polled every 250 ms.
func TestPollEvery(t *testing.T) {
	for _, c := range []struct {
		machines int
		want     time.Duration
	}{{1, 250 * time.Millisecond}, {3, 250 * time.Millisecond}, {40, 400 * time.Millisecond}, {200, 500 * time.Millisecond}, {1000, 500 * time.Millisecond}} {
		d := &Demo{cfg: Config{Machines: c.machines}}
		if got := d.pollEvery(); got != c.want {
			t.Errorf("pollEvery() with %d machines = %v, want %v", c.machines, got, c.want)
		}
		inFlight := min(c.machines, MaxInFlight)
		if rate := 2 * float64(inFlight) / d.pollEvery().Seconds(); rate > 200 {
			t.Errorf("%d machines poll %.0f times a second, want at most 200", c.machines, rate)
		}
	}
}
