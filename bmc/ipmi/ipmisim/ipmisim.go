// Package ipmisim runs OpenIPMI's ipmi_sim as a real IPMI 2.0 BMC on a
// loopback UDP port for tests, with a chassis_control script that keeps the
// machine's power and boot device in files (and can land power changes
// late), and runs ipmitool against it to cross-check what a driver did. A
// machine without ipmi_sim or ipmitool skips the test, or fails it in CI
// (testenv.Missing).
package ipmisim

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"

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

// chassisScript is ipmi_sim's chassis_control program: it keeps the power
// (0 or 1) and the boot device ipmi_sim passes on (none, pxe, default for
// the hard disk, cdrom, bios) in files of its directory, logs every set, and
// lands power changes after the seconds in the file delay (0 when absent),
// as real machines do. A power-on or reset appends the boot device to boots.
const chassisScript = `#!/bin/sh
dir=$(dirname "$0")
shift # the MC address
op=$1; shift
delay=$(cat "$dir/delay" 2>/dev/null || echo 0)
power() { # power VALUE: now or after the delay, in the background
	if [ "$1" = 1 ] && [ "$(cat "$dir/power")" = 0 ]; then cat "$dir/boot" >> "$dir/boots"; fi
	if [ "$delay" = 0 ]; then echo "$1" > "$dir/power"; return; fi
	( sleep "$delay"; echo "$1" > "$dir/power" ) >/dev/null 2>&1 &
}
case $op in
get)
	for p in "$@"; do
		case $p in
		power) echo "power:$(cat "$dir/power")" ;;
		boot) echo "boot:$(cat "$dir/boot")" ;;
		*) echo "unknown parameter $p"; exit 1 ;;
		esac
	done ;;
set)
	echo "$*" >> "$dir/log"
	while [ $# -ge 2 ]; do
		case $1 in
		power) power "$2" ;;
		shutdown) power 0 ;;
		reset) cat "$dir/boot" >> "$dir/boots" ;;
		boot) echo "$2" > "$dir/boot" ;;
		*) echo "unknown parameter $1"; exit 1 ;;
		esac
		shift 2
	done ;;
*) exit 1 ;;
esac
`

// Config describes the BMC and machine of one ipmi_sim.
type Config struct {
	On         bool          // the machine starts powered on
	PowerDelay time.Duration // power changes land this late
	FRU        []byte        // FRU device 0's data; none when nil
}

// Sim is one ipmi_sim serving IPMI 2.0 on a loopback UDP port, with the
// user User and its Password (administrator).
type Sim struct {
	dir  string
	port int
}

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
	s := &Sim{dir: t.TempDir()}
	power := "0"
	if cfg.On {
		power = "1"
	}
	files := map[string]string{"power": power + "\n", "boot": "none\n", "log": "", "boots": "",
		"delay": strconv.FormatFloat(cfg.PowerDelay.Seconds(), 'f', -1, 64) + "\n"}
	for name, content := range files {
		s.write(t, name, content, 0o644)
	}
	s.write(t, "chassis", chassisScript, 0o755)
	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 0x02 0x15 0x9f 0x1291 0xf02\n"
	if cfg.FRU != nil {
		s.write(t, "fru.bin", string(cfg.FRU), 0o644)
		emu += fmt.Sprintf("mc_add_fru_data 0x20 0 %#x file 0 %q\n", len(cfg.FRU), filepath.Join(s.dir, "fru.bin"))
	}
	s.write(t, "sim.emu", emu+"mc_enable 0x20\n", 0o644)
	if err := os.Mkdir(filepath.Join(s.dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		s.port = FreeUDPPort(t)
		if s.start(t) {
			return s
		}
		if try == 2 {
			t.Fatalf("ipmi_sim did not answer on 127.0.0.1:%d; its output:\n%s", s.port, s.Read(t, "sim.out"))
		}
	}
}

// start runs ipmi_sim on s.port and waits until ipmitool gets an answer.
func (s *Sim) start(t testing.TB) bool {
	t.Helper()
	lan := fmt.Sprintf(`name "bcsim"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid %s
  endlan
  chassis_control "%s 0x20"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, s.port, GUID, filepath.Join(s.dir, "chassis"), User, Password)
	s.write(t, "lan.conf", lan, 0o644)
	out, err := os.Create(filepath.Join(s.dir, "sim.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ipmi_sim", "-c", filepath.Join(s.dir, "lan.conf"), "-f", filepath.Join(s.dir, "sim.emu"),
		"-s", filepath.Join(s.dir, "state"), "-n")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("ipmi_sim: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out.Close()
	})
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := s.IPMItoolErr("chassis", "power", "status"); err == nil {
			return true
		}
	}
	_ = cmd.Process.Kill()
	return false
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

func (s *Sim) write(t testing.TB, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// Read returns a state file of the chassis_control script, trimmed:
// power (0 or 1), boot (none, pxe, default for the disk, cdrom, bios), log
// (each set it was asked, one a line: "power 1", "reset 1", "shutdown 1",
// "boot pxe"), boots (the boot device of each power-on and reset).
func (s *Sim) Read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
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
func (s *Sim) Port() int { return s.port }

// Address is the BMC's address as operators enroll it.
func (s *Sim) Address() string { return fmt.Sprintf("ipmi://127.0.0.1:%d", s.port) }

// IPMItool runs ipmitool over lanplus with cipher suite 3 against s, the
// password in the environment, and returns its output.
func (s *Sim) IPMItool(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.IPMItoolErr(args...)
	if err != nil {
		t.Fatalf("ipmitool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// IPMItoolErr is IPMItool for a command that may fail.
func (s *Sim) IPMItoolErr(args ...string) (string, error) {
	base := []string{"-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", User, "-E", "-N", "1", "-R", "1"}
	cmd := exec.Command("ipmitool", append(base, args...)...)
	cmd.Env = append(os.Environ(), "IPMI_PASSWORD="+Password)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// FRU is FRU data with a product area, as a server's FRU 0 has it.
func FRU(manufacturer, name, serial string) []byte {
	ascii := func(s string) (types.TypeLength, []byte) { return types.TypeLength(0xc0 | len(s)), []byte(s) }
	p := &types.FRUProductInfoArea{}
	p.ManufacturerTypeLength, p.Manufacturer = ascii(manufacturer)
	p.NameTypeLength, p.Name = ascii(name)
	p.SerialNumberTypeLength, p.SerialNumber = ascii(serial)
	h := (&types.FRUCommonHeader{FormatVersion: types.FRUFormatVersion, ProductOffset8B: 1}).Pack()
	var sum byte
	for _, b := range h[:7] {
		sum += b
	}
	h[7] = -sum
	return append(h, p.Pack()...)
}
