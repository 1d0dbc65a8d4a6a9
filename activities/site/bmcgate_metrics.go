package site

import "time"

// Breaker states, as the metrics name them.
const (
	BreakerClosed   = "closed"    // the BMC answers
	BreakerFailing  = "failing"   // transport failures in a row, fewer than open the breaker
	BreakerOpen     = "open"      // calls fail at once until the cool-down ends
	BreakerHalfOpen = "half-open" // the cool-down ended: the next call is the probe
)

// Breakers counts the BMC hosts the gate has talked to, per breaker state at
// now; every state is present, zero included.
func (g *BMCGate) Breakers(now time.Time) map[string]int {
	out := map[string]int{BreakerClosed: 0, BreakerFailing: 0, BreakerOpen: 0, BreakerHalfOpen: 0}
	g.mu.Lock()
	hosts := make([]*bmcHost, 0, len(g.hosts))
	for _, h := range g.hosts {
		hosts = append(hosts, h)
	}
	g.mu.Unlock()
	for _, h := range hosts {
		out[h.breaker(now)]++
	}
	return out
}

func (h *bmcHost) breaker(now time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.failures == 0:
		return BreakerClosed
	case now.Before(h.openUntil):
		return BreakerOpen
	case !h.openUntil.IsZero():
		return BreakerHalfOpen
	}
	return BreakerFailing
}
