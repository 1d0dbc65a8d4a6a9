// Package ipmibmc runs OpenIPMI's ipmi_sim as an emulated machine's BMC: a
// real IPMI 2.0 (RMCP+) BMC on a loopback UDP port, one administrator, the
// machine's product UUID as its system GUID, FRU 0 when given, and a
// chassis_control script (chassis.go) that keeps the machine's power and
// boot device in files of its directory. The BMC watches those files
// (watch.go): every power-on or reset calls OnBoot with the boot device, and
// every power-off OnPowerOff, as the emulated Redfish BMC does, so the
// machine boots and stops. The emulated rack (emulate) and the IPMI tests
// (bmc/ipmi/ipmisim) both start it here.
package ipmibmc

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// Install is how to get ipmi_sim, said whenever it is missing.
const Install = "apt-get install openipmi"

// NeedSim is UNSUPPORTED, saying how to install it, when ipmi_sim is missing.
func NeedSim() error {
	if _, err := exec.LookPath("ipmi_sim"); err != nil {
		return errs.New(errs.Unsupported, "an emulated IPMI machine's BMC is OpenIPMI's ipmi_sim, which is not installed: %s", Install)
	}
	return nil
}

// Config describes the BMC and its machine.
type Config struct {
	// Username and Password are the administrator's login: at most 16 and
	// 19 bytes (IPMI 2.0 allows 20, ipmi_sim refuses every login with a
	// password of 20).
	Username, Password string
	// ProductUUID is the machine's SMBIOS UUID, which the BMC sends as its
	// system GUID; none (all zeros) when empty.
	ProductUUID string
	On          bool          // the machine starts powered on
	PowerDelay  time.Duration // power changes land this late
	FRU         []byte        // FRU device 0's data (see FRU); none when nil
	// OnBoot, when set, is called for each power-on or reset, with the boot
	// device in effect (bmc.BootDisk when none is set), one call at a time.
	OnBoot func(dev bmc.BootDevice)
	// OnPowerOff, when set, is called when the machine goes from on to off,
	// one call at a time with OnBoot's.
	OnPowerOff func()
	Logger     *slog.Logger
}

// BMC is one running ipmi_sim.
type BMC struct {
	cfg  Config
	dir  string
	port int
	cmd  *exec.Cmd
	out  *os.File
	stop chan struct{}
	done chan struct{}
	once sync.Once
	// machineMu serializes what the machine itself writes (machine.go).
	machineMu sync.Mutex
}

// Start runs ipmi_sim for cfg with its files in dir (made if missing) until
// Close. Without ipmi_sim it fails with UNSUPPORTED saying how to install it.
func Start(dir string, cfg Config) (*BMC, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := NeedSim(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(dir) // ipmi_sim runs the chassis script by the path in its configuration
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "the BMC's directory %s", dir)
	}
	b := &BMC{cfg: cfg, dir: dir, stop: make(chan struct{}), done: make(chan struct{})}
	if err := b.writeFiles(); err != nil {
		return nil, err
	}
	for try := 0; try < 3; try++ { // another process may take the free port before ipmi_sim binds it
		if err = b.start(); err == nil {
			go b.watch()
			return b, nil
		}
	}
	return nil, err
}

// unquotable are what a quoted string of ipmi_sim's configuration cannot hold.
const unquotable = "\"\\\n"

func (c Config) check() error {
	switch {
	case c.Username == "" || len(c.Username) > 16:
		return errs.Invalid("username", "an IPMI user name is 1 to 16 bytes")
	case c.Password == "" || len(c.Password) > 19:
		return errs.Invalid("password", "ipmi_sim takes a password of 1 to 19 bytes")
	case strings.ContainsAny(c.Username, unquotable):
		return errs.Invalid("username", "ipmi_sim's configuration cannot hold a quote, backslash or newline in a user name")
	case strings.ContainsAny(c.Password, unquotable):
		return errs.Invalid("password", "ipmi_sim's configuration cannot hold a quote, backslash or newline in a password")
	}
	if c.ProductUUID != "" {
		if _, err := guidOf(c.ProductUUID); err != nil {
			return err
		}
	}
	return nil
}

// file is one file of the BMC's directory.
type file struct {
	name, content string
	mode          os.FileMode
}

// writeFiles writes the chassis script, its state files and ipmi_sim's
// emulator commands.
func (b *BMC) writeFiles() error {
	if err := os.MkdirAll(filepath.Join(b.dir, "state"), 0o700); err != nil {
		return errs.Wrap(errs.Internal, err, "make the BMC's directory %s", b.dir)
	}
	power := "0"
	if b.cfg.On {
		power = "1"
	}
	files := []file{{"power", power + "\n", 0o644}, {"boot", "none\n", 0o644}, {"log", "", 0o644}, {"boots", "", 0o644},
		{"delay", strconv.FormatFloat(b.cfg.PowerDelay.Seconds(), 'f', -1, 64) + "\n", 0o644},
		{"chassis", chassisScript, 0o755}}
	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 0x02 0x15 0x9f 0x1291 0xf02\n"
	if b.cfg.FRU != nil {
		files = append(files, file{"fru.bin", string(b.cfg.FRU), 0o644})
		emu += fmt.Sprintf("mc_add_fru_data 0x20 0 %#x file 0 %q\n", len(b.cfg.FRU), filepath.Join(b.dir, "fru.bin"))
	}
	files = append(files, file{"sim.emu", emu + "mc_enable 0x20\n", 0o644})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(b.dir, f.name), []byte(f.content), f.mode); err != nil {
			return errs.Wrap(errs.Internal, err, "write the BMC's %s", f.name)
		}
	}
	return nil
}

// lanConf is ipmi_sim's configuration: one LAN channel on 127.0.0.1:port,
// the system GUID, the chassis script and the administrator (user 2).
func (b *BMC) lanConf(guid string) string {
	g := ""
	if guid != "" {
		g = "    guid " + guid + "\n"
	}
	return fmt.Sprintf(`name "bcsim"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
%s  endlan
  chassis_control "%s 0x20"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, b.port, g, filepath.Join(b.dir, "chassis"), b.cfg.Username, b.cfg.Password)
}

// start runs ipmi_sim on a free port and waits until it answers a ping.
func (b *BMC) start() error {
	port, err := freeUDPPort()
	if err != nil {
		return err
	}
	b.port = port
	guid := ""
	if b.cfg.ProductUUID != "" {
		guid, _ = guidOf(b.cfg.ProductUUID) // checked in Start
	}
	if err := os.WriteFile(filepath.Join(b.dir, "lan.conf"), []byte(b.lanConf(guid)), 0o600); err != nil {
		return errs.Wrap(errs.Internal, err, "write the BMC's lan.conf")
	}
	out, err := os.Create(filepath.Join(b.dir, "sim.out"))
	if err != nil {
		return errs.Wrap(errs.Internal, err, "create the BMC's sim.out")
	}
	cmd := exec.Command("ipmi_sim", "-c", filepath.Join(b.dir, "lan.conf"), "-f", filepath.Join(b.dir, "sim.emu"),
		"-s", filepath.Join(b.dir, "state"), "-n")
	cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = out, out, sysProcAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return errs.Wrap(errs.Internal, err, "start ipmi_sim")
	}
	b.cmd, b.out = cmd, out
	if err := ping(context.Background(), port, 5*time.Second); err != nil {
		b.kill()
		said, _ := os.ReadFile(filepath.Join(b.dir, "sim.out"))
		return errs.Wrap(errs.Internal, err, "ipmi_sim did not answer on 127.0.0.1:%d; it said: %s", port, bytes.TrimSpace(said))
	}
	b.cfg.Logger.Info("emulated IPMI BMC up", "address", b.Address(), "pid", cmd.Process.Pid)
	return nil
}

func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, errs.Wrap(errs.Internal, err, "find a free UDP port")
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// kill ends ipmi_sim by its PID and waits for it.
func (b *BMC) kill() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
	b.out.Close()
	b.cmd = nil
}

// Close stops the watcher and kills ipmi_sim. Safe to call twice.
func (b *BMC) Close() {
	b.once.Do(func() {
		close(b.stop)
		<-b.done
		b.kill()
	})
}

// Address is the BMC's address as operators enroll it.
func (b *BMC) Address() string { return fmt.Sprintf("ipmi://127.0.0.1:%d", b.port) }

// Port is the BMC's UDP port on 127.0.0.1.
func (b *BMC) Port() int { return b.port }

// Read returns a state file of the chassis script, trimmed: power (0 or 1),
// boot (none, pxe, default for the disk, cdrom, bios), log (each set it was
// asked, one a line: "power 1", "reset 1", "shutdown 1", "boot pxe"), boots
// (the boot device of each power-on and reset).
func (b *BMC) Read(name string) (string, error) {
	c, err := os.ReadFile(filepath.Join(b.dir, name))
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "read the BMC's %s", name)
	}
	return strings.TrimSpace(string(c)), nil
}

// Lines returns the lines of a state file, nil when it is empty or unreadable.
func (b *BMC) Lines(name string) []string {
	if c, err := b.Read(name); err == nil && c != "" {
		return strings.Split(c, "\n")
	}
	return nil
}

// Power is the machine's power as the chassis script holds it ("" when
// unreadable).
func (b *BMC) Power() bmc.PowerState {
	switch c, _ := b.Read("power"); c {
	case "1":
		return bmc.On
	case "0":
		return bmc.Off
	}
	return ""
}

// IPMItool runs ipmitool over lanplus with cipher suite 3 against the BMC,
// the password in its environment, and returns what it printed. It waits
// 2 s for each answer and asks 3 times more: ipmi_sim runs its chassis
// script for each power request, which a loaded machine can hold past 1 s
// (ipmitool then said "Unable to set Chassis Power Control to Up/On").
func (b *BMC) IPMItool(args ...string) (string, error) {
	base := []string{"-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(b.port), "-U", b.cfg.Username,
		"-E", "-N", "2", "-R", "3"}
	cmd := exec.Command("ipmitool", append(base, args...)...)
	cmd.Env = append(os.Environ(), "IPMI_PASSWORD="+b.cfg.Password)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
