package esite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/better-compute/better-compute/emulate/qemu"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
)

const (
	diskBytes   = 256 << 20
	bmcUser     = "admin"
	bmcPassword = "esite-bmc-password"
	// agentLine is what the ramdisk prints on its console once it has a
	// lease and the relay answered: it is joining.
	agentLine = "better-compute ramdisk: starting the agent"
)

// machine is one QEMU machine of the site and its tap on the bridge.
type machine struct {
	spec Spec
	q    *qemu.Machine
	tap  string
	disk string
}

// newMachine makes the machine's disk (a marked pattern at its head,
// middle and tail, so a wipe shows) and tap, and starts its BMC on the
// namespace's loopback. The machine is off.
func (s *site) newMachine(i int, spec Spec) (*machine, error) {
	dir := filepath.Join(s.cfg.Dir, spec.Name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	m := &machine{spec: spec, tap: fmt.Sprintf("tap%d", i), disk: filepath.Join(dir, "disk.img")}
	if err := writePatternDisk(m.disk); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"tuntap", "add", "dev", m.tap, "mode", "tap"}, {"link", "set", m.tap, "master", bridge, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	mem := 512
	if spec.Firmware == qemu.UEFI {
		mem = 768
	}
	q, err := qemu.New(qemu.Config{Name: spec.Name, Dir: dir, Firmware: spec.Firmware, UUID: redfishbmc.RandomUUID(),
		Serial: fmt.Sprintf("ESITE-%04d", i+1), MAC: fmt.Sprintf("52:54:00:bc:%02x:01", i+1),
		Netdev: "tap,ifname=" + m.tap + ",script=no,downscript=no", Disk: m.disk, DiskBus: spec.DiskBus, NoOptionROM: spec.NoOptionROM,
		LinkDown: spec.LinkDown, HideNICs: spec.Discovery != "", IPMI: spec.IPMI, DiskSerial: fmt.Sprintf("ESITEDISK%02d", i+1), MemoryMiB: mem, Username: bmcUser, Password: bmcPassword,
		Logger: s.log.With("process", "bmc")})
	if err != nil {
		return nil, err
	}
	var ln net.Listener // ipmi_sim takes a UDP port of its own
	if !spec.IPMI {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
	}
	if err := q.Start(ln); err != nil {
		if ln != nil {
			ln.Close()
		}
		q.Close()
		return nil, err
	}
	m.q = q
	rom := "iPXE option ROM"
	if spec.NoOptionROM {
		rom = "the firmware's own PXE"
	}
	s.say("%s: %s machine, %s disk, NIC %s on %s (%s%s), BMC %s", spec.Name, spec.Firmware, spec.DiskBus, q.Config().MAC, m.tap, rom,
		machineNote(spec), q.BMCAddress())
	return m, nil
}

// machineNote says what is special about the machine, for its first line.
func machineNote(spec Spec) string {
	switch {
	case spec.LinkDown:
		return "; its link is down"
	case spec.Discovery != "":
		return "; its BMC reports no MAC, discovery: " + spec.Discovery
	case spec.IPMI:
		return "; its BMC is ipmi_sim, whose chassis control drives QEMU"
	}
	return ""
}

func (m *machine) close() {
	if m.q != nil {
		m.q.Close()
	}
}

// writePatternDisk writes a sparse disk with 1 MiB of 0xa5 at its head,
// middle and tail.
func writePatternDisk(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	mark := bytes.Repeat([]byte{0xa5}, 1<<20)
	for _, off := range []int64{0, diskBytes / 2, diskBytes - 1<<20} {
		if _, err := f.WriteAt(mark, off); err != nil {
			return err
		}
	}
	return f.Close()
}

// allZero reports whether the file reads back as zeros.
func allZero(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	for {
		n, err := f.Read(buf)
		if bytes.ContainsFunc(buf[:n], func(r rune) bool { return r != 0 }) {
			return false, nil
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// lifecycle enrolls the machine by its BMC and waits for ready, deploys
// and undeploys it with an Image, then checks what the machine went
// through: its disk file wiped, QEMU stopped.
func (s *site) lifecycle(ctx context.Context, m *machine) MachineResult {
	r := MachineResult{Name: m.spec.Name, Firmware: m.spec.Firmware, MAC: m.q.Config().MAC, UUID: m.q.Config().UUID}
	if m.spec.LinkDown {
		return s.unplugged(ctx, m)
	}
	watch := newConsoleWatch(m.q.Config().Console)
	go watch.run(ctx)
	enrolled := time.Now()
	var err error
	if r.Node, err = s.enroll(ctx, m); err != nil {
		r.Error = err.Error()
		return r
	}
	if m.spec.Discovery == DiscoverConfirm {
		err = s.confirm(ctx, m, &r)
	}
	if err == nil {
		r.State, err = s.wait(ctx, m.spec.Name, r.Node, "ready")
	}
	r.EnrollToReady = time.Since(enrolled)
	r.PowerOnToJoin = powerOnToJoin(m.q.Boots(), watch.first())
	if err == nil && m.spec.Discovery != "" {
		err = s.discoveredMACs(ctx, m, &r)
	}
	if err == nil && s.cfg.Image != "" && m.spec.Discovery == "" {
		err = s.deployAndRelease(ctx, m, &r)
	}
	if err != nil {
		r.Error = err.Error()
	}
	s.finish(m, &r)
	return r
}

// finish waits for the machine to be off (the workflow shut it down),
// records what it went through and reads its disk back.
func (s *site) finish(m *machine, r *MachineResult) {
	if r.Error == "" { // else the workflow did not end: nothing to wait for
		deadline := time.Now().Add(30 * time.Second)
		for m.q.Running() != 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if m.q.Running() != 0 {
			r.Error = "QEMU still runs 30s after the workflow ended"
		}
	}
	r.BMCCalls = m.q.BMCCalls()
	if b := m.q.IPMI(); b != nil {
		r.IPMIPowerStatus, _ = b.IPMItool("chassis", "power", "status") // what it said, also when it failed
		r.IPMIPowerStatus = strings.TrimSpace(r.IPMIPowerStatus)
	}
	for _, b := range m.q.Boots() {
		r.Boots = append(r.Boots, fmt.Sprintf("%s(%s)", b.Device, b.Reason))
	}
	if m.q.Running() == 0 {
		zero, err := allZero(m.disk)
		if err != nil {
			r.Error += "; read the disk: " + err.Error()
		}
		r.DiskZero = zero
	}
	s.say("%s: %s; enroll → ready %s (power-on → ramdisk joined %s); disk file wiped: %v; BMC calls %v; boots %v%s", m.spec.Name, r.State,
		r.EnrollToReady.Round(100*time.Millisecond), r.PowerOnToJoin.Round(100*time.Millisecond), r.DiskZero, r.BMCCalls, r.Boots, ipmiNote(r))
	if r.DeployToDeployed > 0 {
		s.say("%s: deploy → deployed %s, → the OS up %s; undeploy → ready %s", m.spec.Name, r.DeployToDeployed.Round(100*time.Millisecond),
			r.DeployToOSUp.Round(100*time.Millisecond), r.UndeployToReady.Round(100*time.Millisecond))
	}
}

// powerOnToJoin is from the start of the latest boot before joined (the
// PXE boot that reached the ramdisk) to joined; 0 when it never joined.
func powerOnToJoin(boots []qemu.Boot, joined time.Time) time.Duration {
	if joined.IsZero() {
		return 0
	}
	var start time.Time
	for _, b := range boots {
		if b.Started.Before(joined) {
			start = b.Started
		}
	}
	if start.IsZero() {
		return 0
	}
	return joined.Sub(start)
}

// ipmiNote is what ipmitool said of an IPMI machine's power, for its line.
func ipmiNote(r *MachineResult) string {
	if r.IPMIPowerStatus == "" {
		return ""
	}
	return "; ipmitool -I lanplus -C 3 chassis power status: " + r.IPMIPowerStatus
}
