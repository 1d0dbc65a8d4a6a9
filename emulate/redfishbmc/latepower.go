package redfishbmc

import (
	"time"

	"github.com/better-compute/better-compute/bmc"
)

// land applies a power change the Reset just accepted: at once, or, with
// Config.PowerDelay (or Faults.PowerLateMin..Max), that long later, as real
// BMCs do. Until it lands the system keeps reporting its old PowerState,
// and a request decided on that state (an On while a ForceOff is pending)
// does what it would do then.
// With Faults.PowerOnRead it waits, past its delay, for the system to be
// read (landDueLocked). Callers hold b.mu; a late change takes it itself.
func (b *BMC) land(change func()) {
	delay := b.powerDelayLocked()
	if b.faults.PowerOnRead {
		b.pending = append(b.pending, pendingPower{due: time.Now().Add(delay), change: change})
		return
	}
	if delay <= 0 {
		change()
		return
	}
	time.AfterFunc(delay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		change()
	})
}

// powerOffLocked turns the machine off; a machine that was on tells the
// OnPowerOff hook. Callers hold b.mu.
func (b *BMC) powerOffLocked() {
	if b.m.power == bmc.Off {
		return
	}
	b.m.power = bmc.Off
	if hook := b.cfg.OnPowerOff; hook != nil {
		go hook()
	}
}
