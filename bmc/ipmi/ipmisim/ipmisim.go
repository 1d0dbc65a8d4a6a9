// Package ipmisim runs OpenIPMI's ipmi_sim as a real IPMI 2.0 BMC on a
// loopback UDP port for tests — the emulated rack's IPMI BMC
// (emulate/ipmibmc), whose chassis_control script keeps the machine's power
// and boot device in files (and can land power changes late) — and runs
// ipmitool against it to cross-check what a driver did. A machine without
// ipmi_sim or ipmitool skips the test, or fails it in CI (testenv.Missing).
package ipmisim

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/emulate/ipmibmc"
	"github.com/better-compute/better-compute/internal/testenv"
)

// The machine behind every ipmi_sim of these tests.
const (
	User     = "admin"
	Password = "sim-pw-7"
	// GUID is the system GUID's bytes as the BMC sends them (SMBIOS
	// order) and UUID the product UUID they are.
	GUID = "44454c4c420010348057b4c04f4d3332"
	UUID = "4c4c4544-0042-3410-8057-b4c04f4d3332"
)

// Config describes the BMC and machine of one ipmi_sim.
type Config struct {
	On         bool          // the machine starts powered on
	PowerDelay time.Duration // power changes land this late
	FRU        []byte        // FRU device 0's data; none when nil
}

// Sim is one ipmi_sim serving IPMI 2.0 on a loopback UDP port, with the
// user User and its Password (administrator).
type Sim struct{ b *ipmibmc.BMC }

// NeedTools ends t when ipmi_sim or ipmitool is missing (a failure in CI).
func NeedTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "apt-get install openipmi ipmitool (./run installs them)")
		}
	}
}

// Start runs ipmi_sim for cfg until the test ends, killed by its PID.
func Start(t testing.TB, cfg Config) *Sim {
	t.Helper()
	NeedTools(t)
	b, err := ipmibmc.Start(t.TempDir(), ipmibmc.Config{Username: User, Password: Password, ProductUUID: UUID,
		On: cfg.On, PowerDelay: cfg.PowerDelay, FRU: cfg.FRU})
	if err != nil {
		t.Fatalf("ipmibmc.Start() = %v", err)
	}
	t.Cleanup(b.Close)
	return &Sim{b: b}
}

// FreeUDPPort returns a loopback UDP port that was free a moment ago.
func FreeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// Read returns a state file of the chassis_control script, trimmed
// (ipmibmc.BMC.Read lists them).
func (s *Sim) Read(t testing.TB, name string) string {
	t.Helper()
	c, err := s.b.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Lines returns the lines of a state file, nil when it is empty.
func (s *Sim) Lines(t testing.TB, name string) []string {
	t.Helper()
	if c := s.Read(t, name); c != "" {
		return strings.Split(c, "\n")
	}
	return nil
}

// Port is the BMC's UDP port on 127.0.0.1.
func (s *Sim) Port() int { return s.b.Port() }

// Address is the BMC's address as operators enroll it.
func (s *Sim) Address() string { return s.b.Address() }

// IPMItool runs ipmitool over lanplus with cipher suite 3 against s, the
// password in the environment, and returns its output.
func (s *Sim) IPMItool(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.b.IPMItool(args...)
	if err != nil {
		t.Fatalf("ipmitool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// IPMItoolErr is IPMItool for a command that may fail.
func (s *Sim) IPMItoolErr(args ...string) (string, error) { return s.b.IPMItool(args...) }

// FRU is FRU data with a product area, as a server's FRU 0 has it.
func FRU(manufacturer, name, serial string) []byte { return ipmibmc.FRU(manufacturer, name, serial) }
