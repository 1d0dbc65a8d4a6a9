//go:build !fakehw

package pid1_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/testenv"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/agent"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
	"github.com/better-compute/better-compute/ramdisk/initramfs"
)

// The QEMU tests boot the ramdisk that `task ramdisk` built (build/ramdisk,
// or BC_RAMDISK_DIR) under TCG, with a virtio NIC on QEMU's user network
// (its DHCP server; the host's loopback is 10.0.2.2) and a virtio disk file.
// They wipe the disk and boot a machine whose BOOTIF names no NIC too.

const (
	vmMAC     = "52:54:00:12:34:56"
	vmUUID    = "6c9b2d3e-8f41-4a57-9b0e-3d2f1a4c5b6d"
	vmSerial  = "BCTEST1"
	diskBytes = 64 << 20
	bootBound = 3 * time.Minute // every boot is killed after this
)

var modulesLoaded = regexp.MustCompile(`better-compute ramdisk: kernel \S+, (\d+) modules loaded`)

// vm is one QEMU process.
type vm struct {
	cmd     *exec.Cmd
	console string
	disk    string
	started time.Time
	exited  chan struct{}
}

func ramdiskDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BC_RAMDISK_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "ramdisk")
	}
	if err := initramfs.CheckDir(dir); err != nil {
		testenv.Missing(t, "the built ramdisk ("+err.Error()+")", "run `./run ramdisk` (task ramdisk), or set BC_RAMDISK_DIR")
	}
	return dir
}

// boot starts QEMU on the ramdisk with cmdline and the test's disk and NIC;
// the process is killed by its PID when the test ends or after bootBound.
func boot(t *testing.T, cmdline string) *vm {
	t.Helper()
	dir := ramdiskDir(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		testenv.Missing(t, "qemu-system-x86_64", "apt-get install qemu-system-x86 (./run installs it)")
	}
	tmp := t.TempDir()
	v := &vm{console: filepath.Join(tmp, "console.log"), disk: filepath.Join(tmp, "disk.img"), exited: make(chan struct{})}
	if err := os.WriteFile(v.disk, bytes.Repeat([]byte{0xa5}, diskBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootBound)
	v.cmd = exec.CommandContext(ctx, qemu, "-accel", "tcg", "-m", "512", "-smp", "1", "-display", "none", "-no-reboot",
		"-monitor", "none", "-serial", "file:"+v.console, "-uuid", vmUUID,
		"-kernel", filepath.Join(dir, initramfs.KernelFile), "-initrd", filepath.Join(dir, initramfs.InitrdFile), "-append", cmdline,
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0,mac="+vmMAC,
		"-drive", "file="+v.disk+",if=none,id=d0,format=raw", "-device", "virtio-blk-pci,drive=d0,serial="+vmSerial,
		"-device", "virtio-rng-pci")
	var stderr bytes.Buffer
	v.cmd.Stderr = &stderr
	v.started = time.Now()
	if err := v.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", qemu, err)
	}
	go func() { _ = v.cmd.Wait(); close(v.exited) }()
	t.Cleanup(func() {
		_ = v.cmd.Process.Kill() // by PID; a no-op once it exited
		<-v.exited
		cancel()
		if t.Failed() {
			t.Logf("QEMU stderr: %s\nconsole (last lines):\n%s", stderr.String(), v.tail(60))
		}
	})
	return v
}

func (v *vm) tail(n int) string {
	b, _ := os.ReadFile(v.console)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (v *vm) running() bool {
	select {
	case <-v.exited:
		return false
	default:
		return true
	}
}

// cmdline is a ramdisk kernel command line pointing at relay through QEMU's
// user network, as the site's iPXE script writes it.
func cmdline(t *testing.T, relay *agenttest.Relay, node, bootif string) (string, string) {
	u, err := url.Parse(relay.URL())
	if err != nil {
		t.Fatal(err)
	}
	tok := relay.NewToken(node)
	return fmt.Sprintf("console=ttyS0 initrd=initrd.img bc.site=https://10.0.2.2:%s bc.node=%s bc.token=%s bc.ca=%s BOOTIF=01-%s",
		u.Port(), node, tok, relay.CAFingerprint(), strings.ReplaceAll(bootif, ":", "-")), tok
}

func send(t *testing.T, relay *agenttest.Relay, v *vm, node, kind string, payload any) kinds.Result {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	id := ids.New(ids.Command)
	relay.Send(kinds.Command{ID: id, NodeID: node, Kind: kind, Payload: b})
	relay.WaitFor(t, 2*time.Minute, kind+"'s result", func() bool { return len(relay.Results(id)) > 0 || !v.running() })
	if len(relay.Results(id)) == 0 {
		t.Fatalf("the VM stopped before %s's result", kind)
	}
	return relay.Results(id)[0]
}

// TestQEMUJoinAndInventory boots the ramdisk: it must load its modules, get
// a DHCP lease on the BOOTIF interface, join the relay with the token from
// its command line, and list the virtio disk by its serial.
func TestQEMUJoinAndInventory(t *testing.T) {
	relay := agenttest.NewRelayFor(t, "10.0.2.2")
	node := ids.New(ids.Node)
	line, tok := cmdline(t, relay, node, vmMAC)
	v := boot(t, line)
	relay.WaitFor(t, bootBound, "the ramdisk's join", func() bool { return len(relay.Joins()) > 0 || !v.running() })
	joined := time.Since(v.started)
	if len(relay.Joins()) == 0 {
		t.Fatalf("QEMU exited before the ramdisk joined")
	}
	t.Logf("QEMU start to ramdisk joined: %v", joined.Round(10*time.Millisecond))
	if j := relay.Joins()[0]; j.Token != tok || j.NodeID != node {
		t.Errorf("join = token %s… node %s, want the command line's token %s… for %s", j.Token[:12], j.NodeID, tok[:12], node)
	}
	console := v.tail(2000)
	if m := modulesLoaded.FindStringSubmatch(console); m == nil || m[1] == "0" || strings.Contains(console, "ramdisk: module:") {
		t.Errorf("console: the modules did not all load (want \"kernel …, N modules loaded\" and no \"module:\" error)")
	}
	for _, want := range []string{"eth0 is 10.0.2.15/24", "from DHCP server 10.0.2.2", "starting the agent for " + node} {
		if !strings.Contains(console, want) {
			t.Errorf("console has no %q", want)
		}
	}
	res := send(t, relay, v, node, kinds.InventoryRefresh, nil)
	if !res.OK {
		t.Fatalf("inventory.refresh = %s %s", res.ErrorKind, res.Error)
	}
	var inv agent.Inventory
	if err := json.Unmarshal(res.Payload, &inv); err != nil {
		t.Fatal(err)
	}
	wantDisk := agent.InventoryDisk{Name: "serial-" + vmSerial, Serial: vmSerial, SizeBytes: diskBytes, Rotational: true}
	if len(inv.Disks) != 1 || inv.Disks[0] != wantDisk {
		t.Errorf("inventory.refresh disks = %+v, want [%+v]", inv.Disks, wantDisk)
	}
	if len(inv.NICs) != 1 || inv.NICs[0].MAC != vmMAC || inv.ProductUUID != vmUUID {
		t.Errorf("inventory.refresh = NICs %+v, product UUID %q; want one NIC %s and UUID %s", inv.NICs, inv.ProductUUID, vmMAC, vmUUID)
	}
	wipe(t, relay, v, node)
}

// TestQEMUMissingBootNIC boots a machine whose BOOTIF names a NIC it does
// not have: the ramdisk must say so on the console and reboot (QEMU, with
// -no-reboot, then exits) instead of hanging.
func TestQEMUMissingBootNIC(t *testing.T) {
	relay := agenttest.NewRelayFor(t, "10.0.2.2")
	line, _ := cmdline(t, relay, ids.New(ids.Node), "52:54:00:99:99:99")
	v := boot(t, line)
	select {
	case <-v.exited:
	case <-time.After(bootBound):
		t.Fatalf("the ramdisk did not reboot within %v", bootBound)
	}
	t.Logf("QEMU start to the ramdisk's reboot: %v", time.Since(v.started).Round(10*time.Millisecond))
	console := v.tail(100)
	for _, want := range []string{
		"better-compute ramdisk: FAILED: the boot interface 52:54:00:99:99:99 (BOOTIF) did not appear within 20s (interfaces seen: [eth0 " + vmMAC + "])",
		"better-compute ramdisk: rebooting in 15s", "reboot: Restarting system",
	} {
		if !strings.Contains(console, want) {
			t.Errorf("console has no %q", want)
		}
	}
	if len(relay.Joins()) != 0 {
		t.Errorf("joins = %d, want none", len(relay.Joins()))
	}
}

// wipe runs a quick disk.wipe on the VM's disk (filled with 0xa5): the
// result is signed and the disk file reads back as zeros.
func wipe(t *testing.T, relay *agenttest.Relay, v *vm, node string) {
	res := send(t, relay, v, node, kinds.DiskWipe, kinds.WipeInput{Mode: "quick", WorkflowID: "wf-qemu", Nonce: "nonce-qemu"})
	if !res.OK {
		t.Fatalf("disk.wipe = %s %s", res.ErrorKind, res.Error)
	}
	b, err := os.ReadFile(v.disk)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Errorf("after disk.wipe the disk file has a non-zero byte at %d", i)
	}
}
