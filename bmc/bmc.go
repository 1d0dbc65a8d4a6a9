// Package bmc owns the small interfaces through which the site's activities drive a
// machine's baseboard management controller (power, boot device, inspection, and
// virtual media where the BMC has it), the values they exchange (power actions and
// states, boot devices, inventory), the credentials that never print their password
// with the BMC's TLS trust (tls.go), and the parsers of BMC addresses and image URLs.
// Drivers (bmc/redfish, bmc/ipmi) implement these interfaces; the registry that picks
// a driver by name is built in main.
package bmc

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// PowerAction is what power.setPower asks of a machine. The strings are the spec's
// (better-compute metal power --action …).
type PowerAction string

const (
	PowerOn              PowerAction = "on"               // power on; nothing if already on
	PowerOff             PowerAction = "off"              // hard power off; nothing if already off
	PowerGracefulOff     PowerAction = "graceful-off"     // ask the OS to shut down; nothing if already off
	PowerReset           PowerAction = "reset"            // hard reset; powers on a machine that is off
	PowerGracefulRestart PowerAction = "graceful-restart" // ask the OS to reboot; powers on a machine that is off
	PowerCycle           PowerAction = "cycle"            // power off then on; powers on a machine that is off
	PowerNMI             PowerAction = "nmi"              // non-maskable interrupt (crash dump); needs the machine on
)

// PowerActions lists every action in the spec's order.
func PowerActions() []PowerAction {
	return []PowerAction{PowerOn, PowerOff, PowerGracefulOff, PowerReset, PowerGracefulRestart, PowerCycle, PowerNMI}
}

// ParsePowerAction returns the action named s, or INVALID_INPUT naming field "action".
func ParsePowerAction(s string) (PowerAction, error) {
	for _, a := range PowerActions() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", errs.Invalid("action", "unknown power action %q: use one of %s", s, joinAny(PowerActions()))
}

// PowerState is a machine's power as its BMC reports it.
type PowerState string

const (
	On  PowerState = "on"
	Off PowerState = "off"
)

// BootDevice is where a machine boots next.
type BootDevice string

const (
	BootPXE  BootDevice = "pxe"  // network boot (the site agent's proxy DHCP and iPXE)
	BootDisk BootDevice = "disk" // the first hard disk
	BootCD   BootDevice = "cd"   // optical or virtual media
	BootBIOS BootDevice = "bios" // firmware setup
)

// BootDevices lists every boot device.
func BootDevices() []BootDevice { return []BootDevice{BootPXE, BootDisk, BootCD, BootBIOS} }

// ParseBootDevice returns the device named s, or INVALID_INPUT naming field "device".
func ParseBootDevice(s string) (BootDevice, error) {
	for _, d := range BootDevices() {
		if string(d) == s {
			return d, nil
		}
	}
	return "", errs.Invalid("device", "unknown boot device %q: use one of %s", s, joinAny(BootDevices()))
}

// Power turns a machine on and off.
type Power interface {
	// SetPower performs action and returns only once the BMC reports the
	// state it asked for (on, or off for off and graceful-off), reading it
	// back with backoff for a bounded time (Confirm): a change the BMC has
	// not reached is never a success. cycle is one off, confirmed, then one
	// on, confirmed, unless the BMC cycles natively. Safe to call twice: on,
	// off and graceful-off do nothing when the machine is already in the
	// wanted state; reset, graceful-restart and cycle power on a machine that
	// is off, so a repeat leaves the machine on and freshly booted. An action
	// the BMC does not allow fails with UNSUPPORTED naming the action, a
	// rejected login with UNAUTHENTICATED (final: retrying it risks locking
	// the BMC account).
	SetPower(ctx context.Context, action PowerAction) (PowerResult, error)
	// PowerState reads the current power state. Safe to call any number of times.
	PowerState(ctx context.Context) (PowerState, error)
}

// Management sets where a machine boots.
type Management interface {
	// SetBootDevice makes the machine boot from dev at its next boot, or at every
	// boot when persistent. Safe to call twice: the second call writes the same
	// override. A device the BMC does not offer fails with UNSUPPORTED.
	SetBootDevice(ctx context.Context, dev BootDevice, persistent bool) error
}

// Inspector reads what the BMC knows about a machine.
type Inspector interface {
	// Inspect reads the machine's inventory. It changes nothing, so it is safe to
	// call any number of times.
	Inspect(ctx context.Context) (Inventory, error)
}

// Driver is everything the site's BMC activities need from one BMC.
type Driver interface {
	Power
	Management
	Inspector
	// Close releases connections. Safe to call twice.
	Close() error
}

// Inventory is what a BMC reports about its machine.
type Inventory struct {
	Manufacturer string   `json:"manufacturer,omitempty"`
	Model        string   `json:"model,omitempty"`
	Serial       string   `json:"serial,omitempty"`
	ProductUUID  string   `json:"productUuid,omitempty"` // SMBIOS system UUID, lowercase canonical form
	MACs         []string `json:"macs,omitempty"`        // NIC MACs, lowercase colon form, deduplicated, sorted
	CPUCount     int      `json:"cpuCount,omitempty"`    // physical processors (sockets)
	CPUThreads   int      `json:"cpuThreads,omitempty"`  // logical processors, when the BMC says
	MemoryBytes  uint64   `json:"memoryBytes,omitempty"` // installed system memory
	BMCFirmware  string   `json:"bmcFirmware,omitempty"` // firmware version of the BMC itself
}

// Credentials are what a driver needs to talk to one BMC safely: the login,
// and how the BMC's TLS certificate is trusted (which drivers without TLS,
// IPMI, ignore). String, GoString and LogValue never show the password, so
// printing or logging Credentials is safe.
type Credentials struct {
	Username string
	Password string
	TLS      TLS // public: a CA, a pin or the insecure opt-out, never a secret
}

func (c Credentials) String() string {
	pw := "<redacted>"
	if c.Password == "" {
		pw = "<none>"
	}
	if c.TLS.IsZero() {
		return fmt.Sprintf("{Username:%s Password:%s}", c.Username, pw)
	}
	return fmt.Sprintf("{Username:%s Password:%s TLS:%s}", c.Username, pw, c.TLS)
}

// GoString keeps %#v from printing the password.
func (c Credentials) GoString() string { return "bmc.Credentials" + c.String() }

// LogValue keeps slog from printing the password.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", c.Username), slog.Bool("password_set", c.Password != ""), slog.String("tls", c.TLS.String()))
}

func joinAny[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// ParseMAC returns a 48-bit MAC in lowercase colon form, or INVALID_INPUT
// naming field. It is the one way MACs are read, from operators, BMCs and
// machines alike.
func ParseMAC(field, s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil || len(hw) != 6 {
		return "", errs.Invalid(field, "%q is not a 48-bit MAC address", s)
	}
	return hw.String(), nil
}
