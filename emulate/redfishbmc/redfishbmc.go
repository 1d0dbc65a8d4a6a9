// Package redfishbmc owns an emulated Redfish BMC: a real HTTP server that serves a
// Redfish resource tree (one we write, or one seeded from a DMTF mockup) for one
// machine, enforces basic and session authentication, keeps the machine's power
// state, boot override and virtual media, and calls a hook each time the machine boots so the
// emulated rack can PXE boot it. It puts on real BMCs' faults on demand
// (faults.go: 500s, slow answers, a session limit, power that lands late and
// only when read, a Once override kept Continuous). The Redfish driver is
// tested against it, and `bcd emulate` runs one per emulated machine.
package redfishbmc

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// Config describes one emulated BMC and its machine.
type Config struct {
	Username string // required: basic auth and session login check it
	Password string

	UUID   string   // the machine's SMBIOS UUID; random when empty
	Serial string   // the machine's serial number; derived from the UUID when empty
	MACs   []string // the machine's NIC MACs, in order
	// HideNICs makes the BMC report no NIC (an empty EthernetInterfaces
	// collection), as an IPMI BMC that cannot tell the machine's MACs.
	HideNICs bool

	// MockupDir, when set, is a DMTF Redfish mockup directory (index.json per
	// resource path) to seed the tree from; the system's UUID, serial and NIC
	// MACs are rewritten to this machine's. When empty we serve our own tree.
	MockupDir string

	SystemID     string // the system's Id in our own tree; "1" when empty (a mockup keeps its own)
	Manufacturer string // our own tree only; defaults below
	Model        string
	CPUs         int    // physical processors
	CPUThreads   int    // logical processors
	MemoryBytes  uint64 // rounded down to GiB in MemorySummary
	Firmware     string // the BMC's FirmwareVersion

	// ResetTypes overrides the ResetType@Redfish.AllowableValues of the system;
	// nil keeps the tree's own (ours allows every type the emulator implements).
	ResetTypes []string
	// BootTargets overrides the BootSourceOverrideTarget allowable values; nil
	// keeps the tree's own.
	BootTargets []string
	// NoSessions serves no SessionService (a BMC with basic authentication
	// only): the service root links no sessions and a login POST is 405.
	NoSessions bool
	// PoweredOn starts the machine on; it starts off otherwise.
	PoweredOn bool
	// PowerDelay lands each accepted power change this long after the Reset
	// (as real BMCs do); at once when zero. See latepower.go.
	PowerDelay time.Duration
	// DefaultBoot is where the machine boots with no override; disk when empty.
	DefaultBoot bmc.BootDevice
	// OnBoot, when set, is called in its own goroutine each time the machine
	// powers on or restarts, with the boot device in effect for that boot.
	OnBoot func(dev bmc.BootDevice)
	// OnPowerOff, when set, is called in its own goroutine each time the
	// machine goes from on to off.
	OnPowerOff func()

	Logger *slog.Logger
}

// BMC is one emulated Redfish BMC. All its methods are safe for concurrent use.
type BMC struct {
	cfg  Config
	log  *slog.Logger
	tree map[string]map[string]any // static resources by path, without trailing slash

	systemPath   string
	resetPath    string
	sessionsPath string
	resetTypes   []string
	bootTargets  []string

	mu       sync.Mutex
	m        machine
	sessions map[string]session // by token
	media    map[string]*drive  // virtual media drives by path (media.go)
	logins   [2]int             // session logins accepted, refused
	limited  int                // session logins refused for the session limit
	requests int                // HTTP requests served
	faults   Faults             // faults.go
	pending  []pendingPower     // power changes waiting for a read (Faults.PowerOnRead)
	srv      *http.Server
	ln       net.Listener
}

// State is a snapshot of the emulated machine, for tests and the rack.
type State struct {
	Power          bmc.PowerState
	BootTarget     string         // Redfish BootSourceOverrideTarget: None, Pxe, Hdd, Cd, BiosSetup, …
	BootEnabled    string         // Redfish BootSourceOverrideEnabled: Disabled, Once, Continuous
	BootMode       string         // Redfish BootSourceOverrideMode: UEFI or Legacy
	Boots          int            // how many times the machine has booted (power-ons and restarts)
	LastBootDevice bmc.BootDevice // the device of the last boot, "" before the first
	Resets         map[string]int // ComputerSystem.Reset requests accepted, by ResetType
	Sessions       int            // open Redfish sessions
	Logins         int            // session logins accepted
	FailedLogins   int            // session logins refused (wrong credentials)
	SessionLimited int            // session logins refused because Faults.SessionLimit sessions were open
	Requests       int            // HTTP requests served, of any kind
	// Calls are the requests that changed the machine, as they arrived over
	// Redfish and were accepted, in order: "power:<ResetType>",
	// "boot:<Target>/<Enabled>" ("-" for a field the PATCH left out, and
	// "/<Mode>" when it set one), "media:insert:<Image>" and "media:eject". Reads, logins and the machine's own power
	// changes (SetPowerState) are not calls.
	Calls []string
}

// New builds a BMC from cfg. It does not listen yet: call Start.
func New(cfg Config) (*BMC, error) {
	if cfg.Username == "" {
		return nil, errs.Invalid("username", "the emulated BMC needs a username")
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	b := &BMC{cfg: cfg, log: cfg.Logger, sessions: map[string]session{}}
	var err error
	if cfg.MockupDir != "" {
		err = b.loadMockup(cfg.MockupDir)
	} else {
		b.buildTree()
	}
	if err != nil {
		return nil, err
	}
	b.findMedia()
	if cfg.NoSessions {
		b.dropSessions()
	}
	if cfg.ResetTypes != nil {
		b.resetTypes = append([]string(nil), cfg.ResetTypes...)
	}
	if cfg.BootTargets != nil {
		b.bootTargets = append([]string(nil), cfg.BootTargets...)
	}
	b.m = machine{power: bmc.Off, bootTarget: "None", bootEnabled: "Disabled", bootMode: "UEFI", resets: map[string]int{}}
	if cfg.PoweredOn {
		b.m.power = bmc.On
	}
	return b, nil
}

// fill validates cfg and fills in defaults.
func (c *Config) fill() error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.UUID == "" {
		c.UUID = RandomUUID()
	}
	if !isUUID(c.UUID) {
		return errs.Invalid("uuid", "%q is not a UUID", c.UUID)
	}
	c.UUID = strings.ToLower(c.UUID)
	c.MACs = append([]string(nil), c.MACs...)
	for i, m := range c.MACs {
		mac, err := bmc.ParseMAC("macs", m)
		if err != nil {
			return err
		}
		c.MACs[i] = mac
	}
	if c.Serial == "" {
		c.Serial = "EMU-" + strings.ToUpper(strings.ReplaceAll(c.UUID, "-", "")[:12])
	}
	if c.DefaultBoot == "" {
		c.DefaultBoot = bmc.BootDisk
	}
	if _, err := bmc.ParseBootDevice(string(c.DefaultBoot)); err != nil {
		return err
	}
	defaults := []struct {
		s *string
		v string
	}{{&c.SystemID, "1"}, {&c.Manufacturer, "better-compute"}, {&c.Model, "Emulated Server"}, {&c.Firmware, "1.0.0-emulated"}}
	for _, d := range defaults {
		if *d.s == "" {
			*d.s = d.v
		}
	}
	if c.CPUs == 0 {
		c.CPUs = 1
	}
	if c.CPUThreads == 0 {
		c.CPUThreads = 4 * c.CPUs
	}
	if c.MemoryBytes == 0 {
		c.MemoryBytes = 8 << 30
	}
	return nil
}

// Start serves the BMC on ln until Close. Start returns at once.
func (b *BMC) Start(ln net.Listener) {
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	b.mu.Lock()
	b.srv, b.ln = srv, ln
	b.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Error("emulated BMC stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// URL returns the base URL of the service, http://host:port, once started.
func (b *BMC) URL() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln == nil {
		return ""
	}
	return "http://" + b.ln.Addr().String()
}

// SystemURL returns the URL of the machine's ComputerSystem resource, the form
// operators enroll a Redfish BMC with.
func (b *BMC) SystemURL() string { return b.URL() + b.systemPath }

// Close stops the server and drops open connections. Safe to call twice.
func (b *BMC) Close() error {
	b.mu.Lock()
	srv := b.srv
	b.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// State returns a snapshot of the machine.
func (b *BMC) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	resets := make(map[string]int, len(b.m.resets))
	for k, v := range b.m.resets {
		resets[k] = v
	}
	return State{
		Power: b.m.power, BootTarget: b.m.bootTarget, BootEnabled: b.m.bootEnabled, BootMode: b.m.bootMode,
		Boots: b.m.boots, LastBootDevice: b.m.lastBoot, Resets: resets, Sessions: len(b.sessions),
		Logins: b.logins[0], FailedLogins: b.logins[1], SessionLimited: b.limited, Requests: b.requests,
		Calls: append([]string(nil), b.m.calls...),
	}
}

// Power is State().Power without State's copies.
func (b *BMC) Power() bmc.PowerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m.power
}

// RandomUUID returns a random (version 4) UUID in lowercase, the form an
// emulated machine's system UUID takes.
func RandomUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand does not fail on Linux
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
			continue
		}
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(c)) {
			return false
		}
	}
	return true
}
