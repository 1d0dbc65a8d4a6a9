// Package qemu owns an emulated server that is a real QEMU virtual machine
// behind an emulated Redfish BMC (emulate/redfishbmc), or behind OpenIPMI's
// ipmi_sim (emulate/ipmibmc) whose chassis control drives it: what the BMC
// is asked to do, QEMU does. Each boot is one QEMU process, started with the
// boot order the BMC's override asks for (bootindex on the NIC or the disk,
// strict), with -no-reboot so that a reset ends the process: power on
// starts QEMU, power off stops it through its monitor (QMP `quit`, or
// `system_powerdown` first for a graceful shutdown), a restart is QMP
// `system_reset` and the next boot's process, and the machine's own reboot
// (its OS, or firmware resetting) boots it again as the BMC's rules say (a
// Once override is used up). So power.setPower and
// management.setBootDevice, sent by the Redfish driver, do what they say
// to a machine that really PXE-boots or boots its disk; so do chassis
// power and chassis bootdev sent over IPMI (bmcs.go: one power loop
// follows either BMC).
package qemu

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/ipmibmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
)

// Firmware is the machine's firmware.
type Firmware string

const (
	BIOS Firmware = "bios" // SeaBIOS, QEMU's default; PXE by the NIC's iPXE option ROM
	UEFI Firmware = "uefi" // OVMF (Debian's ovmf package), with its own NVRAM copy
)

// Debian's OVMF files (package ovmf).
const (
	DefaultOVMFCode = "/usr/share/OVMF/OVMF_CODE.fd"
	DefaultOVMFVars = "/usr/share/OVMF/OVMF_VARS.fd"
)

// Config describes one machine and its BMC.
type Config struct {
	Name     string // for logs
	Dir      string // required: the QMP socket, the NVRAM copy and qemu.log go here
	QEMU     string // the binary; qemu-system-x86_64 from PATH when empty
	Firmware Firmware
	OVMFCode string // UEFI only; DefaultOVMFCode when empty
	OVMFVars string // UEFI only: the template copied to Dir once; DefaultOVMFVars when empty

	UUID   string // SMBIOS UUID, also the BMC's; required
	Serial string // SMBIOS serial, also the BMC's
	MAC    string // the NIC's; required
	Netdev string // QEMU -netdev options without id, e.g. "tap,ifname=tap0,script=no,downscript=no"; required
	NIC    string // the NIC model; virtio-net-pci when empty
	// NoOptionROM leaves out the NIC's option ROM (QEMU's is iPXE, which
	// asks for its script at once). A UEFI machine then PXE-boots with its
	// firmware's own driver and PXE client, as a server does: the proxy
	// DHCP answer names the EFI iPXE build, fetched over TFTP.
	NoOptionROM bool
	// LinkDown starts every boot with the NIC's link down (QMP set_link
	// before the firmware runs), as a machine whose cable is unplugged.
	LinkDown bool
	// HideNICs makes the BMC report no NIC, as an IPMI BMC
	// (redfishbmc.Config.HideNICs); the machine still has its NIC.
	HideNICs bool
	// IPMI makes the BMC ipmi_sim (emulate/ipmibmc) on a loopback UDP port
	// of its own, in Dir/ipmi-bmc, instead of an emulated Redfish BMC; its
	// chassis control's power and boot device drive QEMU, and the machine's
	// own reboots and power offs are written back to it. ipmi_sim must be
	// installed (Debian's openipmi); a password is at most 19 bytes.
	IPMI    bool
	Disk    string // the disk image file (raw); required
	DiskBus string // "virtio" (virtio-blk-pci) or "nvme"; virtio when empty
	// DiskSerial is the disk's serial, what the ramdisk names it by.
	DiskSerial string
	MemoryMiB  int    // 512 when zero
	Console    string // the serial console, appended across boots; Dir/console.log when empty
	Accel      string // tcg when empty
	// GracefulTimeout is how long a graceful shutdown waits for the OS
	// before the power is cut (the BMC already reports off); 30s when zero.
	GracefulTimeout time.Duration

	Username, Password string // the BMC's credentials
	Logger             *slog.Logger
}

// Boot is one boot of the machine: one QEMU process.
type Boot struct {
	N       int            // the BMC's boot count (State.Boots) it is
	Device  bmc.BootDevice // pxe or disk
	PID     int
	Started time.Time
	Ended   time.Time // zero while it runs
	Reason  string    // QEMU's SHUTDOWN reason: guest-reset, guest-shutdown, host-qmp-quit, …
}

// Machine is a QEMU machine behind its BMC.
type Machine struct {
	cfg  Config
	log  *slog.Logger
	bmc  machineBMC
	kick chan struct{}

	cancel context.CancelFunc
	done   chan struct{}

	cur *process // owned by the power loop
	// lastBoot is the BMC's boot number QEMU last started for, and landing
	// when the loop first saw the BMC on with no newer one (bootLanding);
	// the power loop's.
	lastBoot int
	landing  time.Time

	mu    sync.Mutex
	boots []Boot
}

// New checks cfg and builds the machine and its BMC. Nothing runs until
// Start.
func New(cfg Config) (*Machine, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	m := &Machine{cfg: cfg, log: cfg.Logger.With("machine", cfg.Name), kick: make(chan struct{}, 1)}
	var err error
	if cfg.IPMI {
		m.bmc, err = newIPMIBMC(cfg, m.wake)
	} else {
		m.bmc, err = newRedfishBMC(cfg, m.wake)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (c *Config) fill() error {
	for _, r := range []struct{ field, v string }{{"dir", c.Dir}, {"uuid", c.UUID}, {"mac", c.MAC}, {"netdev", c.Netdev}, {"disk", c.Disk}} {
		if r.v == "" {
			return errs.Invalid(r.field, "a QEMU machine needs its %s", r.field)
		}
	}
	if c.Firmware == "" {
		c.Firmware = BIOS
	}
	if !slices.Contains([]Firmware{BIOS, UEFI}, c.Firmware) {
		return errs.Invalid("firmware", "firmware %q: use bios or uefi", c.Firmware)
	}
	if c.DiskBus == "" {
		c.DiskBus = "virtio"
	}
	if c.DiskBus != "virtio" && c.DiskBus != "nvme" {
		return errs.Invalid("diskBus", "disk bus %q: use virtio or nvme", c.DiskBus)
	}
	defaults := []struct {
		s *string
		v string
	}{{&c.Name, "qemu"}, {&c.QEMU, "qemu-system-x86_64"}, {&c.OVMFCode, DefaultOVMFCode},
		{&c.OVMFVars, DefaultOVMFVars}, {&c.NIC, "virtio-net-pci"}, {&c.Console, filepath.Join(c.Dir, "console.log")}, {&c.Accel, "tcg"}}
	for _, d := range defaults {
		if *d.s == "" {
			*d.s = d.v
		}
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = 512
	}
	if c.GracefulTimeout == 0 {
		c.GracefulTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Start checks the firmware files, serves the BMC on ln (nil for an IPMI
// machine: ipmi_sim starts on a port of its own) and starts the power
// loop. The machine is off until the BMC powers it on.
func (m *Machine) Start(ln net.Listener) error {
	if err := os.MkdirAll(m.cfg.Dir, 0o700); err != nil {
		return errs.Wrap(errs.Internal, err, "make %s", m.cfg.Dir)
	}
	if err := m.prepareFirmware(); err != nil {
		return err
	}
	if err := m.bmc.start(ln); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	go m.powerLoop(ctx)
	return nil
}

// Close stops the BMC and the power loop and kills QEMU by its PID. Safe
// to call twice.
func (m *Machine) Close() {
	m.bmc.close()
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
}

// BMC is the machine's emulated Redfish BMC; nil for an IPMI machine.
func (m *Machine) BMC() *redfishbmc.BMC {
	if r, ok := m.bmc.(*redfishBMC); ok {
		return r.b
	}
	return nil
}

// IPMI is the machine's ipmi_sim once started; nil for a Redfish machine.
func (m *Machine) IPMI() *ipmibmc.BMC {
	if p, ok := m.bmc.(*ipmiBMC); ok {
		return p.b
	}
	return nil
}

// BMCAddress is the BMC's address as an operator enrolls it, with
// BMCDriver's driver: the Redfish system URL, or ipmi://127.0.0.1:PORT
// once started.
func (m *Machine) BMCAddress() string { return m.bmc.address() }

// BMCDriver is bmc.DriverRedfish or bmc.DriverIPMI.
func (m *Machine) BMCDriver() string { return m.bmc.driver() }

// BMCCalls are the machine-changing requests the BMC accepted, in order:
// the Redfish BMC's State().Calls ("power:On", "boot:Pxe/Once", …), or
// what ipmi_sim asked its chassis control to set ("boot pxe", "power 1",
// "reset 1", "shutdown 1", …).
func (m *Machine) BMCCalls() []string { return m.bmc.calls() }

// Config is the machine's configuration, defaults filled.
func (m *Machine) Config() Config { return m.cfg }

// Boots returns every boot so far, oldest first.
func (m *Machine) Boots() []Boot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.boots)
}

// Running returns the PID of the QEMU process of the current boot, 0 when
// the machine is off.
func (m *Machine) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.boots); n > 0 && m.boots[n-1].Ended.IsZero() {
		return m.boots[n-1].PID
	}
	return 0
}

// prepareFirmware checks the OVMF files of a UEFI machine and copies the
// NVRAM template to Dir once (the machine keeps its variables).
func (m *Machine) prepareFirmware() error {
	if m.cfg.Firmware != UEFI {
		return nil
	}
	if _, err := os.Stat(m.cfg.OVMFCode); err != nil {
		return errs.New(errs.InvalidInput, "the UEFI firmware %s is missing: apt-get install ovmf", m.cfg.OVMFCode)
	}
	vars := m.varsPath()
	if _, err := os.Stat(vars); err == nil {
		return nil
	}
	b, err := os.ReadFile(m.cfg.OVMFVars)
	if err != nil {
		return errs.New(errs.InvalidInput, "the UEFI variables template %s is missing: apt-get install ovmf", m.cfg.OVMFVars)
	}
	// Atomic: a half-written copy would pass the Stat above on every later start.
	return atomicfile.Write(vars, b, 0o600)
}

func (m *Machine) varsPath() string { return filepath.Join(m.cfg.Dir, "OVMF_VARS.fd") }

func (m *Machine) String() string { return fmt.Sprintf("%s (%s)", m.cfg.Name, m.cfg.Firmware) }
