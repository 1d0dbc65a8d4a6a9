package ipmibmc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/internal/atomicfile"
)

// Boots is how many times the machine has booted (power-ons and resets:
// the lines of boots) and the device of the latest boot ("" before the
// first), as the power loop of a QEMU machine (emulate/qemu) follows it.
func (b *BMC) Boots() (int, bmc.BootDevice) {
	lines := b.Lines("boots")
	if len(lines) == 0 {
		return 0, ""
	}
	return len(lines), deviceOf(lines[len(lines)-1])
}

// GracefulOff reports whether the newest power request ipmi_sim passed on
// was a soft off (chassis control "shutdown"), which asks the OS first.
func (b *BMC) GracefulOff() bool {
	log := b.Lines("log")
	for i := len(log) - 1; i >= 0; i-- {
		switch op, _, _ := strings.Cut(log[i], " "); op {
		case "shutdown":
			return true
		case "power", "reset":
			return false
		}
	}
	return false
}

// Rebooted records that the machine restarted by itself during its boot
// number boot (its OS or firmware reset it): a line in boots with the
// device set, as a reset does (ipmi_sim does not say when a boot-once
// override is used up, so the device last set). It does nothing and
// returns false when the machine is off or has booted since: a request
// through the BMC won.
func (b *BMC) Rebooted(boot int) bool {
	b.machineMu.Lock()
	defer b.machineMu.Unlock()
	if n, _ := b.Boots(); b.Power() != bmc.On || n != boot {
		return false
	}
	dev, err := b.Read("boot")
	if err != nil {
		b.cfg.Logger.Error("emulated IPMI BMC: the machine's reboot", "err", err)
		return false
	}
	f, err := os.OpenFile(filepath.Join(b.dir, "boots"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(dev + "\n") // one append: the chassis script's own appends stay whole lines
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		b.cfg.Logger.Error("emulated IPMI BMC: the machine's reboot", "err", err)
		return false
	}
	return true
}

// PoweredOff records that the machine turned itself off during its boot
// number boot (its OS shut down, or it stopped): power 0, so the BMC
// reports off. Like Rebooted, it does nothing and returns false when the
// machine is off or has booted since.
func (b *BMC) PoweredOff(boot int) bool {
	b.machineMu.Lock()
	defer b.machineMu.Unlock()
	if n, _ := b.Boots(); b.Power() != bmc.On || n != boot {
		return false
	}
	// Atomic, so the chassis script never reads a power file half written.
	if err := atomicfile.Write(filepath.Join(b.dir, "power"), []byte("0\n"), 0o644); err != nil {
		b.cfg.Logger.Error("emulated IPMI BMC: the machine's power off", "err", err)
		return false
	}
	return true
}
