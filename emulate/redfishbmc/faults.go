package redfishbmc

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// Faults are the misbehaviours of real BMCs the emulator can put on, set at
// any time with SetFaults, so the driver and the site's BMC gate are tested
// against them. The zero value is a well-behaved BMC.
type Faults struct {
	// Fail500 answers the next Fail500 requests (any path, the service
	// root and logins included) HTTP 500 InternalError, then serves again:
	// a transient burst.
	Fail500 int
	// Always500 answers every request HTTP 500 while set: a BMC whose web
	// service is broken.
	Always500 bool
	// Slow holds every answer this long (less if the client gives up).
	Slow time.Duration
	// SessionLimit refuses a session login while this many sessions are
	// open, with HTTP 503 and the DMTF SessionLimitExceeded message, as
	// real BMCs do when their few sessions are taken; 0 is no limit.
	SessionLimit int
	// PowerLateMin and PowerLateMax, when PowerLateMax is set, land each
	// accepted power change a random delay in [Min, Max] after the Reset,
	// instead of Config.PowerDelay.
	PowerLateMin, PowerLateMax time.Duration
	// PowerOnRead lands an accepted power change only when the system
	// resource is read (GET) once its delay has passed: a BMC whose state
	// machine advances when it is asked. Until then it reports the old
	// PowerState however long it waits.
	PowerOnRead bool
	// ContinuousBoot stores a Once override as Continuous, whatever device
	// it names, as BMCs that cannot boot once do (Disabled still clears it).
	ContinuousBoot bool
}

// pendingPower is a power change that lands at the first read after due.
type pendingPower struct {
	due    time.Time
	change func()
}

// SetFaults puts f on the BMC from its next request on. Turning PowerOnRead
// off lands the changes still waiting for a read at once.
func (b *BMC) SetFaults(f Faults) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = f
	if !f.PowerOnRead {
		for _, p := range b.pending {
			p.change()
		}
		b.pending = nil
	}
}

// fault answers r as the faults say, before anything else; it reports
// whether it did (a slow answer then goes on to be served).
func (b *BMC) fault(w http.ResponseWriter, r *http.Request) bool {
	b.mu.Lock()
	f := b.faults
	fail := f.Always500 || f.Fail500 > 0
	if f.Fail500 > 0 {
		b.faults.Fail500--
	}
	b.mu.Unlock()
	if f.Slow > 0 {
		t := time.NewTimer(f.Slow)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return true // the client gave up: nobody reads an answer
		}
	}
	if fail {
		writeError(w, http.StatusInternalServerError, "Base.1.8.InternalError",
			"The request failed due to an internal service error.  The service is still operational.")
	}
	return fail
}

// sessionLimitMessage is the DMTF Base registry's SessionLimitExceeded.
const sessionLimitMessage = "The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation."

// sessionsFullLocked reports whether a login must be refused for the
// session limit, counting the refusal. Callers hold b.mu.
func (b *BMC) sessionsFullLocked() bool {
	if lim := b.faults.SessionLimit; lim > 0 && len(b.sessions) >= lim {
		b.limited++
		return true
	}
	return false
}

// powerDelayLocked is how late the next power change lands. Callers hold b.mu.
func (b *BMC) powerDelayLocked() time.Duration {
	lo, hi := b.faults.PowerLateMin, b.faults.PowerLateMax
	if hi <= 0 {
		return b.cfg.PowerDelay
	}
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

// landDueLocked applies, in order, the changes waiting for a read whose
// delay has passed: the system is being read. Callers hold b.mu.
func (b *BMC) landDueLocked() {
	now := time.Now()
	var keep []pendingPower
	for _, p := range b.pending {
		if now.Before(p.due) {
			keep = append(keep, p)
			continue
		}
		p.change()
	}
	b.pending = keep
}
