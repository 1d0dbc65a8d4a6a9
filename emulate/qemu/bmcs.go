package qemu

import (
	"net"
	"path/filepath"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/ipmibmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
)

// machineBMC is what the machine needs of its BMC, Redfish or IPMI: the
// power loop follows state and tells it what the machine did by itself.
type machineBMC interface {
	start(ln net.Listener) error
	close()
	state() bmcState
	// rebooted and poweredOff record the machine's own reboot or power off
	// during boot number boot; false, doing nothing, when the BMC has
	// booted it since or it is off.
	rebooted(boot int) bool
	poweredOff(boot int) bool
	address() string // as an operator enrolls it
	driver() string  // bmc.DriverRedfish or bmc.DriverIPMI
	calls() []string // the machine-changing requests it accepted, in order
}

// bmcState is the BMC's view of the machine.
type bmcState struct {
	Power  bmc.PowerState
	Boots  int            // power-ons and restarts so far
	Device bmc.BootDevice // of the latest boot
	// GracefulOff and GracefulRestart: the newest power request asks the OS
	// to shut down, or to restart, before the power is cut.
	GracefulOff, GracefulRestart bool
}

// redfishBMC is an emulated Redfish BMC (emulate/redfishbmc).
type redfishBMC struct{ b *redfishbmc.BMC }

func newRedfishBMC(cfg Config, wake func()) (*redfishBMC, error) {
	b, err := redfishbmc.New(redfishbmc.Config{Username: cfg.Username, Password: cfg.Password, UUID: cfg.UUID,
		Serial: cfg.Serial, MACs: []string{cfg.MAC}, HideNICs: cfg.HideNICs, MemoryBytes: uint64(cfg.MemoryMiB) << 20,
		// What QEMU can do: no NMI (not wired to QMP), boot from the NIC or the disk only.
		ResetTypes:  []string{"On", "ForceOn", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle", "PushPowerButton"},
		BootTargets: []string{"None", "Pxe", "Hdd"}, DefaultBoot: bmc.BootDisk,
		OnBoot: func(bmc.BootDevice) { wake() }, Logger: cfg.Logger.With("machine", cfg.Name)})
	if err != nil {
		return nil, err
	}
	return &redfishBMC{b}, nil
}

func (r *redfishBMC) start(ln net.Listener) error {
	if ln == nil {
		return errs.Invalid("listener", "a Redfish BMC needs a listener")
	}
	r.b.Start(ln)
	return nil
}

func (r *redfishBMC) close() { r.b.Close() }

func (r *redfishBMC) state() bmcState {
	st := r.b.State()
	last := lastPower(st.Calls)
	return bmcState{Power: st.Power, Boots: st.Boots, Device: st.LastBootDevice,
		GracefulOff: last == "GracefulShutdown", GracefulRestart: last == "GracefulRestart"}
}

func (r *redfishBMC) rebooted(boot int) bool   { return r.b.Rebooted(boot) }
func (r *redfishBMC) poweredOff(boot int) bool { return r.b.PoweredOff(boot) }
func (r *redfishBMC) address() string          { return r.b.SystemURL() }
func (r *redfishBMC) driver() string           { return bmc.DriverRedfish }
func (r *redfishBMC) calls() []string          { return r.b.State().Calls }

// lastPower is the ResetType of the newest power request the BMC accepted.
func lastPower(calls []string) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if rt, ok := strings.CutPrefix(calls[i], "power:"); ok {
			return rt
		}
	}
	return ""
}

// ipmiBMC is OpenIPMI's ipmi_sim (emulate/ipmibmc), started by start: its
// chassis control keeps power and boots in files, which state reads. IPMI
// has no graceful restart; its soft off is a graceful shutdown.
type ipmiBMC struct {
	cfg ipmibmc.Config
	dir string
	b   *ipmibmc.BMC // nil until start
}

func newIPMIBMC(cfg Config, wake func()) (*ipmiBMC, error) {
	if err := ipmibmc.NeedSim(); err != nil {
		return nil, err
	}
	return &ipmiBMC{dir: filepath.Join(cfg.Dir, "ipmi-bmc"), cfg: ipmibmc.Config{Username: cfg.Username,
		Password: cfg.Password, ProductUUID: cfg.UUID, FRU: ipmibmc.FRU("Better Compute", "QEMU Machine", cfg.Serial),
		OnBoot: func(bmc.BootDevice) { wake() }, Logger: cfg.Logger.With("machine", cfg.Name)}}, nil
}

func (p *ipmiBMC) start(ln net.Listener) error {
	if ln != nil {
		return errs.Invalid("listener", "an IPMI BMC (ipmi_sim) takes a loopback UDP port of its own: pass no listener")
	}
	b, err := ipmibmc.Start(p.dir, p.cfg)
	if err != nil {
		return err
	}
	p.b = b
	return nil
}

func (p *ipmiBMC) close() {
	if p.b != nil {
		p.b.Close()
	}
}

func (p *ipmiBMC) state() bmcState {
	n, dev := p.b.Boots()
	return bmcState{Power: p.b.Power(), Boots: n, Device: dev, GracefulOff: p.b.GracefulOff()}
}

func (p *ipmiBMC) rebooted(boot int) bool   { return p.b.Rebooted(boot) }
func (p *ipmiBMC) poweredOff(boot int) bool { return p.b.PoweredOff(boot) }
func (p *ipmiBMC) address() string          { return p.b.Address() }
func (p *ipmiBMC) driver() string           { return bmc.DriverIPMI }
func (p *ipmiBMC) calls() []string          { return p.b.Lines("log") }
