//go:build !fakehw

package qemu

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	bmcredfish "github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// The markers the test machine prints on its serial console: its disk's
// boot sector prints diskMarker and halts; the PXE boot file QEMU's user
// network serves (a PXE NBP, run by the NIC's iPXE ROM) prints pxeMarker
// and resets the machine through the keyboard controller, as an OS
// rebooting would.
const (
	diskMarker = "BC-DISK-BOOTED"
	pxeMarker  = "BC-PXE-BOOTED"
	waitBound  = 90 * time.Second // every wait for the machine is bounded
)

// realMode returns x86 real-mode code loaded at 0000:7c00 that prints msg
// on COM1, then runs tail.
func realMode(msg string, tail ...byte) []byte {
	head := []byte{0xfa, 0x31, 0xc0, 0x8e, 0xd8} // cli; xor ax,ax; mov ds,ax
	// mov dx,0x3f8; next: lodsb; test al,al; jz +3; out dx,al; jmp next
	loop := append([]byte{0xba, 0xf8, 0x03, 0xac, 0x84, 0xc0, 0x74, 0x03, 0xee, 0xeb, 0xf8}, tail...)
	at := 0x7c00 + len(head) + 3 + len(loop)
	code := append(head, 0xbe, byte(at), byte(at>>8)) // mov si,msg
	code = append(code, loop...)
	return append(code, msg+"\r\n\x00"...)
}

var (
	halt   = []byte{0xf4, 0xeb, 0xfd}                         // hlt; jmp $-1
	reboot = []byte{0xb0, 0xfe, 0xe6, 0x64, 0xf4, 0xeb, 0xfd} // mov al,0xfe; out 0x64,al (reset); hlt loop
)

// testMachine starts a BIOS machine whose disk prints diskMarker and whose
// PXE boot (QEMU's user network: DHCP and TFTP) prints pxeMarker and
// reboots, and returns it with a Redfish driver to its BMC.
func testMachine(t *testing.T, tweaks ...func(*Config)) (*Machine, *bmcredfish.Driver) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := startTestMachine(t, ln, tweaks...)
	addr, err := bmc.ParseAddress(bmc.DriverRedfish, strings.Replace(m.BMC().SystemURL(), "http://", "redfish+http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	d, err := bmcredfish.New(bmcredfish.Config{Address: addr, Credentials: bmc.Credentials{Username: "admin", Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	return m, d
}

// startTestMachine starts testMachine's machine, its BMC on ln (nil for
// IPMI), and closes it when the test ends.
func startTestMachine(t *testing.T, ln net.Listener, tweaks ...func(*Config)) *Machine {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		testenv.Missing(t, "qemu-system-x86_64", "apt-get install qemu-system-x86 ipxe-qemu (./run installs them)")
	}
	dir := t.TempDir()
	sector := realMode(diskMarker, halt...)
	sector = append(sector, make([]byte, 510-len(sector))...)
	sector = append(sector, 0x55, 0xaa)
	disk := filepath.Join(dir, "disk.img")
	tftp := filepath.Join(dir, "tftp")
	if err := os.WriteFile(disk, append(sector, make([]byte, 1<<20)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tftp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tftp, "boot.0"), realMode(pxeMarker, reboot...), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := newTweaked(Config{Name: "test-bios", Dir: filepath.Join(dir, "m"), UUID: "5a0d3f7e-2b1c-4e8a-9f6d-0c1b2a3d4e5f",
		MAC: "52:54:00:bc:51:01", Netdev: "user,tftp=" + tftp + ",bootfile=boot.0", Disk: disk, MemoryMiB: 128,
		Username: "admin", Password: "pw", GracefulTimeout: 2 * time.Second}, tweaks...)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		if t.Failed() {
			con, _ := os.ReadFile(m.cfg.Console)
			qlog, _ := os.ReadFile(filepath.Join(m.cfg.Dir, "qemu.log"))
			t.Logf("boots: %+v\nconsole:\n%s\nqemu.log:\n%s", m.Boots(), con, qlog)
		}
	})
	return m
}

func newTweaked(c Config, tweaks ...func(*Config)) (*Machine, error) {
	for _, f := range tweaks {
		f(&c)
	}
	return New(c)
}

// waitFor polls cond until it holds or waitBound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, waitBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *Machine) printed(marker string) int {
	b, _ := os.ReadFile(m.cfg.Console)
	return strings.Count(string(b), marker)
}

// boot is what the test compares of a Boot.
type boot struct {
	Device bmc.BootDevice
	Reason string
}

func (m *Machine) bootList() []boot {
	var out []boot
	for _, b := range m.Boots() {
		out = append(out, boot{b.Device, b.Reason})
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestPowerAndBootOrder drives a real QEMU through the Redfish driver, as
// the site agent's power.setPower and management.setBootDevice do: each
// power action and boot override must show on the machine's console and in
// its QEMU processes.
func TestPowerAndBootOrder(t *testing.T) {
	m, d := testMachine(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustPower := func(_ bmc.PowerResult, err error) { t.Helper(); must(err) }
	if st, err := d.PowerState(ctx); err != nil || st != bmc.Off || m.Running() != 0 {
		t.Fatalf("at start: PowerState() = %q, %v; QEMU pid %d; want off and no QEMU", st, err, m.Running())
	}

	// No override: the machine boots its disk.
	mustPower(d.SetPower(ctx, bmc.PowerOn))
	waitFor(t, "disk boot", func() bool { return m.printed(diskMarker) == 1 })

	// PXE once, then a reset (QMP system_reset): the machine PXE-boots, its
	// boot file reboots it, and the override is used up: the disk again.
	must(d.SetBootDevice(ctx, bmc.BootPXE, false))
	mustPower(d.SetPower(ctx, bmc.PowerReset))
	waitFor(t, "PXE boot then disk boot", func() bool { return m.printed(pxeMarker) == 1 && m.printed(diskMarker) == 2 })
	pid := m.Running()

	// Off: QMP quit; the process is gone.
	mustPower(d.SetPower(ctx, bmc.PowerOff))
	waitFor(t, "QEMU gone", func() bool { return m.Running() == 0 && !alive(pid) })
	want := []boot{{bmc.BootDisk, "host-qmp-system-reset"}, {bmc.BootPXE, "guest-reset"}, {bmc.BootDisk, "host-qmp-quit"}}
	if diff := cmp.Diff(want, m.bootList()); diff != "" {
		t.Errorf("boots (-want +got):\n%s", diff)
	}

	// PXE continuous: every reboot boots from the network again.
	must(d.SetBootDevice(ctx, bmc.BootPXE, true))
	mustPower(d.SetPower(ctx, bmc.PowerOn))
	waitFor(t, "three PXE boots in a row", func() bool { return m.printed(pxeMarker) >= 3 })
	if n := m.printed(diskMarker); n != 2 {
		t.Errorf("disk boots after PXE continuous = %d, want still 2", n)
	}

	// Disk continuous, then a graceful shutdown the halted machine ignores:
	// QMP system_powerdown, and the power is cut after GracefulTimeout.
	must(d.SetBootDevice(ctx, bmc.BootDisk, true))
	mustPower(d.SetPower(ctx, bmc.PowerCycle))
	waitFor(t, "disk boot after the cycle", func() bool { return m.printed(diskMarker) == 3 })
	mustPower(d.SetPower(ctx, bmc.PowerGracefulOff))
	waitFor(t, "QEMU gone after the graceful shutdown", func() bool { return m.Running() == 0 })
	last := m.Boots()[len(m.Boots())-1]
	if last.Device != bmc.BootDisk || last.Reason != "host-qmp-quit" || last.Ended.Sub(last.Started) < m.cfg.GracefulTimeout {
		t.Errorf("last boot = %+v, want from disk, ended by quit after the %v graceful timeout", last, m.cfg.GracefulTimeout)
	}
	if st, err := d.PowerState(ctx); err != nil || st != bmc.Off {
		t.Errorf("PowerState() at the end = %q, %v, want off", st, err)
	}
	for _, b := range m.Boots() {
		if alive(b.PID) {
			t.Errorf("QEMU pid %d of boot %d is still running", b.PID, b.N)
		}
	}
}

// TestCloseKillsQEMU checks that Close leaves no QEMU behind.
func TestCloseKillsQEMU(t *testing.T) {
	m, d := testMachine(t)
	if _, err := d.SetPower(context.Background(), bmc.PowerOn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "disk boot", func() bool { return m.printed(diskMarker) == 1 })
	pid := m.Running()
	m.Close()
	if alive(pid) {
		t.Errorf("QEMU pid %d is alive after Close", pid)
	}
	m.Close() // twice is fine
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	_, err := New(Config{Dir: t.TempDir(), UUID: "5a0d3f7e-2b1c-4e8a-9f6d-0c1b2a3d4e5f", Netdev: "user", Disk: "d.img", Username: "a"})
	if err == nil || !strings.Contains(err.Error(), "mac") {
		t.Errorf("New(without MAC) = %v, want an error naming the mac", err)
	}
	_, err = New(Config{Dir: t.TempDir(), UUID: "5a0d3f7e-2b1c-4e8a-9f6d-0c1b2a3d4e5f", MAC: "52:54:00:00:00:01", Netdev: "user",
		Disk: "d.img", Username: "a", Firmware: "coreboot"})
	if err == nil || !strings.Contains(err.Error(), "coreboot") {
		t.Errorf("New(firmware coreboot) = %v, want an error naming it", err)
	}
}

// TestLinkDown: a machine whose link is down runs (its disk boots: QEMU
// was let go after set_link) but its PXE boot never gets the boot file
// that, link up, prints its marker within seconds (TestPowerAndBootOrder).
func TestLinkDown(t *testing.T) {
	m, d := testMachine(t, func(c *Config) { c.LinkDown = true })
	ctx := context.Background()
	if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "disk boot with the link down", func() bool { return m.printed(diskMarker) == 1 })
	if err := d.SetBootDevice(ctx, bmc.BootPXE, false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.SetPower(ctx, bmc.PowerReset); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the PXE boot", func() bool { b := m.Boots(); return len(b) == 2 && b[1].Device == bmc.BootPXE })
	time.Sleep(15 * time.Second)
	if n := m.printed(pxeMarker); n != 0 || m.Running() == 0 {
		t.Errorf("15s into a PXE boot with the link down: PXE boot file ran %d times, QEMU pid %d; want 0 and running", n, m.Running())
	}
}
