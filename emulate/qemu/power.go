package qemu

import (
	"context"
	"time"

	"github.com/better-compute/better-compute/bmc"
)

// powerPoll is how often the loop compares the BMC with QEMU: the BMC's
// boot hook (OnBoot) wakes it at once, and a power-off is found at the next
// poll (the BMCs' OnPowerOff hooks are not wired to this loop).
const powerPoll = 100 * time.Millisecond

// wake makes the power loop look at the BMC now.
func (m *Machine) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// powerLoop makes QEMU follow the BMC until ctx ends, then kills the
// running QEMU by its PID.
func (m *Machine) powerLoop(ctx context.Context) {
	defer close(m.done)
	tick := time.NewTicker(powerPoll)
	defer tick.Stop()
	for {
		m.converge()
		var exited chan struct{}
		if m.cur != nil {
			exited = m.cur.exited
		}
		select {
		case <-ctx.Done():
			if m.cur != nil {
				m.cur.kill()
				m.ended(m.cur)
			}
			return
		case <-m.kick:
		case <-tick.C:
		case <-exited:
		}
	}
}

// converge does one step towards what the BMC says: a QEMU that ended by
// itself is told to the BMC (a reboot boots again, anything else is off);
// then a machine that is off has no QEMU, and one that is on has the QEMU
// of its latest boot, from the device of that boot.
func (m *Machine) converge() {
	if p := m.cur; p != nil && p.wait(0) {
		m.cur = nil
		m.ended(p)
		m.machineDid(p)
	}
	st := m.bmc.state()
	p := m.cur
	switch {
	case st.Power == bmc.Off && p != nil:
		m.cur = nil
		m.stop(p, st.GracefulOff)
	case st.Power == bmc.On && p != nil && p.boot != st.Boots:
		m.cur = nil
		if st.GracefulRestart {
			m.stop(p, true)
		} else {
			m.reset(p)
		}
		m.boot(st)
	case st.Power == bmc.On && p == nil:
		if m.bootLanding(st) {
			return
		}
		m.boot(st)
	}
}

// landWait bounds how long a power-on waits for its boot record.
const landWait = 2 * time.Second

// bootLanding reports whether the BMC says on with no boot since the last
// one QEMU ran: ipmi_sim's chassis control writes a power-on's power before
// its boot record (emulate's machines need the power on first), and a loop
// that read between the two started QEMU for the boot before, from its
// device, then reset it when the record came: a first boot from the disk
// reset by the host, an extra PXE boot (CI, TestIPMIChassisDrivesQEMU and
// TestEmulatedSite). A power-on from off always makes a record, so the loop
// waits for it, up to landWait, then boots as before (a BMC left on with no
// QEMU and no record coming).
func (m *Machine) bootLanding(st bmcState) bool {
	if st.Boots != m.lastBoot {
		m.landing = time.Time{}
		return false
	}
	if m.landing.IsZero() {
		m.landing = time.Now()
	}
	return time.Since(m.landing) < landWait
}

// machineDid tells the BMC what the machine did by itself: QEMU under
// -no-reboot exits with reason guest-reset when its OS or firmware resets
// it, which is a reboot; any other end (the OS powered off, QEMU died) is
// power off. A BMC request since that boot wins (the BMC checks).
func (m *Machine) machineDid(p *process) {
	reason := p.qmp.shutdownReason()
	if reason == "guest-reset" {
		if m.bmc.rebooted(p.boot) {
			m.log.Info("qemu: the machine rebooted itself", "boot", p.boot)
		}
		return
	}
	if m.bmc.poweredOff(p.boot) {
		m.log.Info("qemu: the machine stopped by itself", "boot", p.boot, "reason", reason)
	}
}

// boot starts the QEMU of the BMC's latest boot; a QEMU that cannot start
// leaves the machine off at the BMC, as a machine that does not power on.
func (m *Machine) boot(st bmcState) {
	dev := st.Device
	if dev != bmc.BootPXE {
		dev = bmc.BootDisk
	}
	m.lastBoot, m.landing = st.Boots, time.Time{}
	p, err := m.start(st.Boots, dev)
	if err != nil {
		m.log.Error("qemu: the machine cannot start", "err", err)
		m.bmc.poweredOff(st.Boots)
		return
	}
	m.cur = p
}
