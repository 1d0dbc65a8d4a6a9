// Package emulate owns `bcd emulate`, the emulated rack: machines, each
// with an emulated Redfish BMC (emulate/redfishbmc) on 127.0.0.1, fake disks
// (sparse files, ramdisk/disk under the fakehw build tag) and NICs with
// 52:54:00 MACs. Booting a machine from PXE does what iPXE would — it fetches
// the site agent's script for its first MAC and, for a ramdisk entry, runs
// the real ramdisk agent (ramdisk/agent) with that kernel command line on the
// machine's disks; booting from disk "runs its OS"; booting from cd with an
// image in the BMC's virtual media runs a fake installer (install.go) whose
// installed OS runs bcd node. An operator enrolls the machines it prints
// like real ones.
package emulate

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// Config describes the rack.
type Config struct {
	Machines int    // how many machines; 1 when zero
	Dir      string // fake disks and machine identities, Dir/<machine>/; required
	// BootURL is the site agent's HTTP boot listener, what DHCP would give
	// iPXE (http://host:port). Required.
	BootURL string
	// IPMI is how many of the machines (the last) have an IPMI BMC,
	// OpenIPMI's ipmi_sim (emulate/ipmibmc), instead of a Redfish one. An
	// IPMI BMC reports no MAC: enroll those machines with the MACs Machines
	// prints.
	IPMI int
	// DisksPerMachine are the disk sizes in bytes; default 2 TiB and 16 TiB
	// (sparse; on ext4 a 16 TiB file stops 1 MiB short).
	DisksPerMachine []int64
	Username        string // the BMCs' login; "admin" when empty
	Password        string // the BMCs' password (never printed)
	MockupDir       string // optional DMTF Redfish mockup for the BMCs
	// BMCsHideMACs makes every machine's BMC report no MAC, as an IPMI BMC:
	// such a machine is enrolled by its product UUID, and PXE discovery
	// finds its MAC.
	BMCsHideMACs bool
	Logger       *slog.Logger
	// BMCLogger and RamdiskLogger get the BMCs' and the ramdisks' logs
	// apart from the rack's own (nil: Logger).
	BMCLogger, RamdiskLogger *slog.Logger
	// RamdiskTracer traces the commands the ramdisks run (agent.Config.Tracer);
	// nil for none.
	RamdiskTracer trace.TracerProvider
	// NodeAgent runs an installed OS's bcd node (with the join token its
	// autoinstall wrote) until ctx ends: the machine powers off or boots
	// again. Nil: a machine installed from virtual media runs none.
	NodeAgent func(ctx context.Context, n InstalledNode) error
}

// MaxMachines bounds a rack. Each machine holds a BMC listener of its own on
// loopback (an ephemeral port), two sparse disk files and a goroutine
// watching its power; a ramdisk runs only while it boots, so the bound is
// the file descriptors (and ports) one process may hold, not a subnet.
const MaxMachines = 4000

// Boot states of a machine.
const (
	BootedOff     = "off"
	BootedRamdisk = "ramdisk"
	BootedOS      = "os"
)

// MachineInfo is what an operator needs to enroll a machine.
type MachineInfo struct {
	Name        string   `json:"name"`
	BMCAddress  string   `json:"bmcAddress"` // the Redfish BMC's system URL, or ipmi://127.0.0.1:PORT
	BMCDriver   string   `json:"bmcDriver"`
	BMCUsername string   `json:"bmcUsername"`
	MACs        []string `json:"macs"`
	ProductUUID string   `json:"productUuid"`
}

// MachineState is what an emulated machine is doing, for tests.
type MachineState struct {
	Power        string   // on or off, as the BMC says
	BootedInto   string   // BootedOff, BootedRamdisk or BootedOS
	RamdiskBoots int      // how many times the ramdisk started
	Tokens       []string // bc.token of each ramdisk boot, in order (secrets: tests only)
	OSImage      bool     // at the last OS boot, a disk held a deployed image
	Kexeced      bool     // the running OS came up through boot.kexec
	LastError    string   // the last boot problem (script fetch, ramdisk exit)

	// What the machine was sent, for tests of the exact sequence: the
	// machine-changing Redfish requests its BMC accepted, in order
	// (redfishbmc.State.Calls: "power:<ResetType>", "boot:<Target>/<Enabled>";
	// an IPMI BMC's: what ipmi_sim asked its chassis control to set, "boot
	// pxe", "power 1", "reset 1"),
	// and the command kinds its ramdisks ran, in order, across boots.
	BMCCalls   []string
	RamdiskRan []string

	// Installs counts the OS installs from virtual media; InstallTokens
	// are the join tokens their user data held, in order (secrets: tests
	// only); NodeAgentRuns counts the installed OS's node agent starts.
	Installs      int
	InstallTokens []string
	NodeAgentRuns int
	// Media is the image URL in the BMC's virtual CD drive, "" when empty.
	Media string
}

// Rack is a running emulated rack.
type Rack struct {
	cfg      Config
	log      *slog.Logger
	client   *http.Client
	ctx      context.Context
	cancel   context.CancelFunc
	machines []*machine
	wg       sync.WaitGroup
	once     sync.Once
}

// Start creates (or reopens, in the same Dir) the machines and serves
// their BMCs until Close.
func Start(ctx context.Context, cfg Config) (*Rack, error) {
	if !fakeHW {
		return nil, errs.New(errs.Unsupported, "bcd emulate needs a binary built with -tags fakehw (its disks are files)")
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Rack{cfg: cfg, log: cfg.Logger, client: &http.Client{Timeout: 30 * time.Second}, ctx: rctx, cancel: cancel}
	for i := range cfg.Machines {
		m, err := r.newMachine(i)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.machines = append(r.machines, m)
	}
	r.log.Info("emulate: rack up", "machines", len(r.machines), "dir", cfg.Dir, "bootUrl", cfg.BootURL)
	return r, nil
}

func (c *Config) fill() error {
	if c.Machines == 0 {
		c.Machines = 1
	}
	if c.Machines < 0 || c.Machines > MaxMachines {
		return errs.Invalid("machines", "%d machines: use 1 to %d", c.Machines, MaxMachines)
	}
	if err := c.checkIPMI(); err != nil {
		return err
	}
	if c.Dir == "" {
		return errs.Invalid("dir", "the emulated rack needs a directory for its disks")
	}
	if c.BootURL == "" {
		return errs.Invalid("bootUrl", "the emulated rack needs the site agent's boot URL (http://host:port)")
	}
	if c.DisksPerMachine == nil {
		c.DisksPerMachine = []int64{2 << 40, 16 << 40}
	}
	if c.Username == "" {
		c.Username = "admin"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BMCLogger == nil {
		c.BMCLogger = c.Logger
	}
	if c.RamdiskLogger == nil {
		c.RamdiskLogger = c.Logger
	}
	return os.MkdirAll(c.Dir, 0o700)
}

// Machines lists the machines, in order.
func (r *Rack) Machines() []MachineInfo {
	out := make([]MachineInfo, 0, len(r.machines))
	for _, m := range r.machines {
		out = append(out, m.info())
	}
	return out
}

// State returns a machine's state; NOT_FOUND for an unknown name.
func (r *Rack) State(name string) (MachineState, error) {
	m, err := r.machine(name)
	if err != nil {
		return MachineState{}, err
	}
	return m.state(), nil
}

// InjectWipeFault makes one disk of the machine (its last) keep a nonzero
// block through every wipe, so its read-back fails; ClearWipeFault undoes it.
func (r *Rack) InjectWipeFault(name string) error {
	return r.setFault(name, disk.Fault{LeaveNonzero: true, NonzeroAt: 1 << 30})
}

// ClearWipeFault clears what InjectWipeFault did.
func (r *Rack) ClearWipeFault(name string) error { return r.setFault(name, disk.Fault{}) }

// UnplugNIC takes the machine's network link down (or up again): a PXE
// boot then finds no network, as with a pulled cable, and the machine boots
// from its disk.
func (r *Rack) UnplugNIC(name string, unplugged bool) error {
	m, err := r.machine(name)
	if err != nil {
		return err
	}
	m.unplugged.Store(unplugged)
	return nil
}

// SetBMCFaults puts f on the machine's Redfish BMC from its next request
// on (redfishbmc.Faults; the zero value clears them). A machine with an
// IPMI BMC is INVALID_INPUT.
func (r *Rack) SetBMCFaults(name string, f redfishbmc.Faults) error {
	m, err := r.machine(name)
	if err != nil {
		return err
	}
	rb, ok := m.bmc.(redfishBMC)
	if !ok {
		return errs.Invalid("machine", "%s has an IPMI BMC: only a Redfish BMC takes faults", name)
	}
	rb.b.SetFaults(f)
	return nil
}

func (r *Rack) setFault(name string, f disk.Fault) error {
	m, err := r.machine(name)
	if err != nil {
		return err
	}
	return disk.InjectFault(m.disks[len(m.disks)-1], f)
}

func (r *Rack) machine(name string) (*machine, error) {
	for _, m := range r.machines {
		if m.name == name {
			return m, nil
		}
	}
	return nil, errs.New(errs.NotFound, "no emulated machine %q", name)
}

// Close stops every ramdisk and BMC. Safe to call twice.
func (r *Rack) Close() {
	r.once.Do(func() {
		r.cancel()
		for _, m := range r.machines {
			m.close()
		}
		r.wg.Wait()
	})
}

// Run starts the rack, prints its machines as JSON to out ({"machines":
// [...]}) so an operator can enroll them, and serves until ctx is done.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	r, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"machines": r.Machines()}); err != nil {
		return errs.Wrap(errs.Internal, err, "print the machines")
	}
	<-ctx.Done()
	return nil
}
