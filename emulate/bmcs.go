package emulate

import (
	"net"
	"path/filepath"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/ipmibmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
)

// machineBMC is what a machine needs of its BMC, Redfish or IPMI.
type machineBMC interface {
	address() string       // as an operator enrolls it
	driver() string        // bmc.DriverRedfish or bmc.DriverIPMI
	power() bmc.PowerState // as the BMC holds it
	calls() []string       // the machine-changing requests it accepted, in order
	media() string         // the image URL in its virtual CD drive, "" when empty or none
	close()
}

// isIPMI reports whether machine i (from 0) has an IPMI BMC: the last
// Config.IPMI machines of the rack do.
func (c *Config) isIPMI(i int) bool { return i >= c.Machines-c.IPMI }

// startBMC starts machine m's BMC, Redfish or IPMI, which boots the machine
// through m.onBoot whenever it powers it on or resets it, and stops it
// through m.onPowerOff when it powers it off.
func (m *machine) startBMC(i int) (machineBMC, error) {
	cfg := &m.rack.cfg
	log := cfg.BMCLogger.With("machine", m.name)
	if cfg.isIPMI(i) {
		b, err := ipmibmc.Start(filepath.Join(m.dir, "ipmi-bmc"), ipmibmc.Config{Username: cfg.Username,
			Password: cfg.Password, ProductUUID: m.id.UUID, OnBoot: m.onBoot, OnPowerOff: m.onPowerOff, Logger: log,
			FRU: ipmibmc.FRU("Better Compute", "Emulated IPMI Machine", "EMU"+strings.ToUpper(m.id.UUID[:8]))})
		if err != nil {
			return nil, err
		}
		return ipmiBMC{b}, nil
	}
	b, err := redfishbmc.New(redfishbmc.Config{Username: cfg.Username, Password: cfg.Password, UUID: m.id.UUID,
		MACs: m.id.MACs, HideNICs: cfg.BMCsHideMACs, MockupDir: cfg.MockupDir, CPUs: 1, CPUThreads: 4, MemoryBytes: 8 << 30,
		OnBoot: m.onBoot, OnPowerOff: m.onPowerOff, Logger: log})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "listen for the BMC of %s", m.name)
	}
	b.Start(ln)
	return redfishBMC{b}, nil
}

// redfishBMC is an emulated Redfish BMC (emulate/redfishbmc).
type redfishBMC struct{ b *redfishbmc.BMC }

func (r redfishBMC) address() string       { return r.b.SystemURL() }
func (r redfishBMC) driver() string        { return bmc.DriverRedfish }
func (r redfishBMC) power() bmc.PowerState { return r.b.Power() }
func (r redfishBMC) calls() []string       { return r.b.State().Calls }
func (r redfishBMC) media() string         { return r.b.Media() }
func (r redfishBMC) close()                { r.b.Close() }

// ipmiBMC is ipmi_sim (emulate/ipmibmc). Its calls are what ipmi_sim asked
// the chassis control script to set ("boot pxe", "power 1", "reset 1", …).
type ipmiBMC struct{ b *ipmibmc.BMC }

func (p ipmiBMC) address() string       { return p.b.Address() }
func (p ipmiBMC) driver() string        { return bmc.DriverIPMI }
func (p ipmiBMC) power() bmc.PowerState { return p.b.Power() }
func (p ipmiBMC) calls() []string       { return p.b.Lines("log") }
func (p ipmiBMC) media() string         { return "" } // IPMI has no virtual media
func (p ipmiBMC) close()                { p.b.Close() }

// checkIPMI checks Config.IPMI, and that ipmi_sim is installed when a
// machine needs it.
func (c *Config) checkIPMI() error {
	if c.IPMI < 0 || c.IPMI > c.Machines {
		return errs.Invalid("ipmi", "%d IPMI machines of %d: use 0 to %d", c.IPMI, c.Machines, c.Machines)
	}
	if c.IPMI == 0 {
		return nil
	}
	return ipmibmc.NeedSim()
}
