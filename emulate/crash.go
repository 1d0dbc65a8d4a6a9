package emulate

import (
	"github.com/better-compute/better-compute/bmc"
)

// CrashRamdisk ends the machine's running ramdisk at once, the emulated
// rack's kill -9 of a ramdisk (in a real machine its init dies and the
// kernel panics): the machine stays powered on and runs nothing until
// ResetMachine. It reports whether a ramdisk was running. The chaos
// harness (demo/chaos_test.go) uses it.
func (r *Rack) CrashRamdisk(name string) (bool, error) {
	m, err := r.machine(name)
	if err != nil {
		return false, err
	}
	m.bootMu.Lock()
	defer m.bootMu.Unlock()
	m.mu.Lock()
	running := m.stopRD != nil && !ended(m.rdDone)
	m.mu.Unlock()
	if !running { // none, or one that ended by itself (a refused join)
		return false, nil
	}
	m.stopRamdisk()
	m.setError("ramdisk crashed (killed)")
	m.log.Info("emulate: the ramdisk was killed; the machine hangs until reset")
	return true, nil
}

// ResetMachine boots the machine again from the network, as a watchdog (or
// the kernel's panic=N) resets a machine whose ramdisk died: it fetches the
// site agent's script for its MAC and runs what it says. A machine its BMC
// booted or powered off meanwhile is left alone; it reports whether it reset.
func (r *Rack) ResetMachine(name string) (bool, error) {
	m, err := r.machine(name)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	hung := m.stopRD == nil && m.st.BootedInto == BootedRamdisk
	m.mu.Unlock()
	if !hung || m.bmc.power() != bmc.On {
		return false, nil
	}
	m.onBoot(bmc.BootPXE)
	return true, nil
}

func ended(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
