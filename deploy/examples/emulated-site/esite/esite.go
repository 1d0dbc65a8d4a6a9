// Package esite owns the emulated site of deploy/examples/emulated-site: a
// provisioning network of Linux network namespaces joined by a bridge,
// dnsmasq leasing addresses on it, and on the bridge our site agent (proxy
// DHCP, TFTP, HTTP boot, relay, image cache), the control plane, and QEMU
// machines (legacy BIOS and UEFI, TCG) behind QMP-backed emulated Redfish
// BMCs, or one behind OpenIPMI's ipmi_sim whose chassis control drives QEMU
// (emulate/qemu). Each machine is enrolled by its BMC and goes, for
// real, PXE → iPXE → the ramdisk → inventory → a quick wipe of its disk
// file → ready, and with an OS image, deploy (the image written, the
// machine booted from its disk, the OS seen on its console) → undeploy →
// ready.
//
// Run builds the namespaces from the host, then runs this same program
// again inside the site namespace (Inner), where everything of ours shares
// one loopback; a program that calls Run must call Inner first thing in
// main (or TestMain).
package esite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/better-compute/better-compute/emulate/qemu"
)

// Spec is one machine of the site.
type Spec struct {
	Name     string        `json:"name"`
	Firmware qemu.Firmware `json:"firmware"`
	DiskBus  string        `json:"diskBus"` // virtio or nvme
	// NoOptionROM: the firmware PXE-boots with its own network stack and
	// fetches iPXE from the site over TFTP (see qemu.Config.NoOptionROM).
	NoOptionROM bool `json:"noOptionROM"`
	// Discovery, when set, hides the machine's NIC from its BMC (as IPMI)
	// and enrolls it by its product UUID only, so its MAC is learnt from
	// its PXE boot: DiscoverConfirm waits for its candidate and confirms
	// it with metal.confirmMac; DiscoverTrusted enrolls it in a pool with
	// trustProvisioningNetwork, which takes the candidate at once.
	Discovery string `json:"discovery"`
	// LinkDown unplugs the machine's NIC (qemu.Config.LinkDown): its
	// enrollment must fail, naming where the boot stopped.
	LinkDown bool `json:"linkDown"`
	// IPMI puts the machine behind ipmi_sim (qemu.Config.IPMI), enrolled
	// with the ipmi driver and its MAC (an IPMI BMC tells none) in a pool
	// of the built-in ipmi hardware profile.
	IPMI bool `json:"ipmi"`
}

// The ways a Spec's machine learns its MAC by PXE discovery.
const (
	DiscoverConfirm = "confirm"
	DiscoverTrusted = "trusted"
)

// Config is one run of the site.
type Config struct {
	Machines   []Spec `json:"machines"`
	RamdiskDir string `json:"ramdiskDir"` // build/ramdisk
	// Image, when set, is the OS image (mkimage.sh) each ready machine is
	// then deployed with, seen running, and undeployed from, back to ready.
	Image string `json:"image"`
	Dir   string `json:"dir"` // everything of the run: data dir, disks, consoles, logs
	// ReadyTimeout bounds each machine's enroll → ready.
	ReadyTimeout time.Duration `json:"readyTimeout"`
	// BootStall is the site agent's siteagent.Config.BootStall; its
	// default when zero.
	BootStall time.Duration `json:"bootStall"`
	// Verbose sends every process's log to the output, not only to Dir.
	Verbose bool `json:"verbose"`
}

// DefaultMachines are the full site: a legacy BIOS machine with a virtio
// disk whose NIC's option ROM is Debian's iPXE (QEMU's), and a UEFI
// machine with an NVMe disk whose firmware PXE-boots by itself (proxy
// DHCP → snponly.efi over TFTP → iPXE), as a server's does; then the same
// two again behind BMCs that report no MAC, found by PXE discovery (the
// BIOS one confirmed by an operator, the UEFI one on a trusting pool),
// so both firmwares' DHCP option 97 is matched to a product UUID; and a
// legacy BIOS machine whose BMC is ipmi_sim.
func DefaultMachines() []Spec {
	return []Spec{{Name: "bios-1", Firmware: qemu.BIOS, DiskBus: "virtio"},
		{Name: "uefi-1", Firmware: qemu.UEFI, DiskBus: "nvme", NoOptionROM: true},
		{Name: "bios-pxe", Firmware: qemu.BIOS, DiskBus: "virtio", Discovery: DiscoverConfirm},
		{Name: "uefi-pxe", Firmware: qemu.UEFI, DiskBus: "nvme", NoOptionROM: true, Discovery: DiscoverTrusted},
		{Name: "bios-ipmi", Firmware: qemu.BIOS, DiskBus: "virtio", IPMI: true}}
}

// CIMachines are what `./run test` takes: the IPMI BIOS machine through
// the whole loop and the Redfish BIOS one found by PXE discovery, so both
// drivers run and CI runs two machines.
func CIMachines() []Spec {
	all := DefaultMachines()
	return []Spec{all[4], all[2]}
}

// UnpluggedMachine is a BIOS machine whose NIC's link is down.
func UnpluggedMachine() Spec {
	return Spec{Name: "bios-unplugged", Firmware: qemu.BIOS, DiskBus: "virtio", LinkDown: true}
}

// Result is what a run measured, per machine.
type Result struct {
	Machines []MachineResult `json:"machines"`
	Error    string          `json:"error,omitempty"`
}

// MachineResult is one machine's run.
type MachineResult struct {
	Name     string        `json:"name"`
	Firmware qemu.Firmware `json:"firmware"`
	MAC      string        `json:"mac"`  // the machine's NIC's
	UUID     string        `json:"uuid"` // its SMBIOS (product) UUID
	Node     string        `json:"node"`
	State    string        `json:"state"`
	// PowerOnToJoin is from the QEMU start of the PXE boot to the ramdisk
	// starting its agent (the console says so), for the first ramdisk boot.
	PowerOnToJoin time.Duration `json:"powerOnToJoin"`
	EnrollToReady time.Duration `json:"enrollToReady"`
	// With an Image: deploy → deployed, deploy → the OS on the console,
	// and undeploy → ready.
	DeployToDeployed time.Duration `json:"deployToDeployed"`
	DeployToOSUp     time.Duration `json:"deployToOSUp"`
	UndeployToReady  time.Duration `json:"undeployToReady"`
	DiskZero         bool          `json:"diskZero"` // the disk file read back as zeros after the wipe
	// With Discovery: the MACs the node has at the end, and what metal
	// discovered showed of its PXE boot before it had one.
	MACs       []string `json:"macs"`
	Candidate  string   `json:"candidate"`  // the discovered MAC whose candidateFor was the node
	ClientUUID string   `json:"clientUuid"` // DHCP option 97 as the firmware sent it
	// With LinkDown: enroll → failed, and the node's lastError.
	EnrollToFailed time.Duration `json:"enrollToFailed"`
	LastError      string        `json:"lastError"`
	BMCCalls       []string      `json:"bmcCalls"`
	// With IPMI: what ipmitool -I lanplus -C 3 chassis power status said
	// at the end, a client other than our driver reading the BMC.
	IPMIPowerStatus string   `json:"ipmiPowerStatus"`
	Boots           []string `json:"boots"` // device and end reason of each QEMU process
	Error           string   `json:"error,omitempty"`
}

// Run builds the lab, runs the site in it and removes the lab, also on
// failure. Out gets the progress lines. Check first: Run needs root and
// the tools.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	cfg = withDefaults(cfg)
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return Result{}, err
	}
	l, err := newLab(cfg.Dir)
	if err != nil {
		return Result{}, err
	}
	defer l.cleanup()
	leaserLog, err := os.Create(filepath.Join(cfg.Dir, "dnsmasq.log"))
	if err != nil {
		return Result{}, err
	}
	defer leaserLog.Close()
	if err := l.startLeaser(leaserLog); err != nil {
		return Result{}, err
	}
	return l.runInner(ctx, cfg, out)
}

func withDefaults(cfg Config) Config {
	if len(cfg.Machines) == 0 {
		cfg.Machines = DefaultMachines()
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 6 * time.Minute
	}
	if abs, err := filepath.Abs(cfg.Dir); err == nil {
		cfg.Dir = abs
	}
	if abs, err := filepath.Abs(cfg.RamdiskDir); err == nil {
		cfg.RamdiskDir = abs
	}
	if abs, err := filepath.Abs(cfg.Image); err == nil && cfg.Image != "" {
		cfg.Image = abs
	}
	return cfg
}

// Inner runs the site when this process is the one Run started inside the
// namespace, and then exits; otherwise it returns at once.
func Inner() {
	raw := os.Getenv(innerEnv)
	if raw == "" {
		return
	}
	var cfg Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "esite: bad %s: %v\n", innerEnv, err)
		os.Exit(2)
	}
	res := runSite(cfg, os.Stdout)
	b, _ := json.Marshal(res)
	fmt.Printf("%s%s\n", resultPrefix, b)
	if res.Error != "" {
		os.Exit(1)
	}
	os.Exit(0)
}
