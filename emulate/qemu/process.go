package qemu

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// process is one boot's QEMU process.
type process struct {
	boot   int // the BMC's boot count it was started for
	dev    bmc.BootDevice
	cmd    *exec.Cmd
	qmp    *qmp
	exited chan struct{}
}

// args are QEMU's arguments for a boot from dev: only that device has a
// bootindex, and strict boot keeps the firmware from trying the other.
func (m *Machine) args(dev bmc.BootDevice) []string {
	c := m.cfg
	nicIndex, diskIndex := "", ",bootindex=1"
	if dev == bmc.BootPXE {
		nicIndex, diskIndex = ",bootindex=1", ""
	}
	nic := c.NIC + ",netdev=n0,mac=" + c.MAC + nicIndex
	if c.NoOptionROM {
		nic += ",romfile="
	}
	a := []string{"-name", c.Name, "-accel", c.Accel, "-m", fmt.Sprint(c.MemoryMiB), "-smp", "1",
		"-display", "none", "-vga", "none", "-no-reboot", "-boot", "strict=on", "-uuid", c.UUID,
		"-monitor", "none", "-qmp", "unix:" + m.qmpPath() + ",server=on,wait=off",
		"-chardev", "file,id=con,append=on,path=" + c.Console, "-serial", "chardev:con",
		"-netdev", c.Netdev + ",id=n0", "-device", nic,
		"-drive", "file=" + c.Disk + ",if=none,id=d0,format=raw", "-device", "virtio-rng-pci"}
	if c.LinkDown {
		a = append(a, "-S") // paused until start has set the link down
	}
	if c.Serial != "" {
		a = append(a, "-smbios", "type=1,serial="+c.Serial)
	}
	disk := "virtio-blk-pci,drive=d0"
	if c.DiskBus == "nvme" {
		disk = "nvme,drive=d0"
	}
	if c.DiskSerial != "" {
		disk += ",serial=" + c.DiskSerial
	}
	a = append(a, "-device", disk+diskIndex)
	if c.Firmware == UEFI {
		a = append(a, "-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+c.OVMFCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+m.varsPath())
	}
	return a
}

func (m *Machine) qmpPath() string { return filepath.Join(m.cfg.Dir, "qmp.sock") }

// start starts QEMU for the BMC's boot n from dev and connects to its
// monitor. A QEMU that does not open its monitor within 10s is killed.
func (m *Machine) start(n int, dev bmc.BootDevice) (*process, error) {
	_ = os.Remove(m.qmpPath())
	logf, err := os.OpenFile(filepath.Join(m.cfg.Dir, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "open qemu.log")
	}
	defer logf.Close() // the child has its own copy
	p := &process{boot: n, dev: dev, cmd: exec.Command(m.cfg.QEMU, m.args(dev)...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = sysProcAttr()
	started := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "start %s (apt-get install qemu-system-x86)", m.cfg.QEMU)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.qmp, err = dialQMP(ctx, m.qmpPath())
	if err != nil {
		p.kill()
		return nil, errs.Wrap(errs.Unavailable, err, "QEMU of %s did not open its monitor; see %s", m.cfg.Name, filepath.Join(m.cfg.Dir, "qemu.log"))
	}
	if err := m.unplug(p); err != nil {
		p.kill()
		return nil, err
	}
	m.mu.Lock()
	m.boots = append(m.boots, Boot{N: n, Device: dev, PID: p.cmd.Process.Pid, Started: started})
	m.mu.Unlock()
	m.log.Info("qemu: machine boots", "boot", n, "device", string(dev), "pid", p.cmd.Process.Pid)
	return p, nil
}

// unplug sets the NIC's link down on a LinkDown machine's paused QEMU,
// then lets it run.
func (m *Machine) unplug(p *process) error {
	if !m.cfg.LinkDown {
		return nil
	}
	if err := p.qmp.runArgs("set_link", map[string]any{"name": "n0", "up": false}); err != nil {
		return errs.Wrap(errs.Unavailable, err, "set the link of %s down", m.cfg.Name)
	}
	if err := p.qmp.run("cont"); err != nil {
		return errs.Wrap(errs.Unavailable, err, "start %s after setting its link down", m.cfg.Name)
	}
	return nil
}

// stop ends the process: QMP system_powerdown first when graceful, then
// quit, then SIGKILL by its PID if it is still there after 10s.
func (m *Machine) stop(p *process, graceful bool) {
	if graceful {
		if err := p.qmp.run("system_powerdown"); err == nil && p.wait(m.cfg.GracefulTimeout) {
			m.ended(p)
			return
		}
		m.log.Info("qemu: the OS did not shut down; cutting the power", "timeout", m.cfg.GracefulTimeout)
	}
	_ = p.qmp.run("quit")
	if !p.wait(10 * time.Second) {
		p.kill()
	}
	m.ended(p)
}

// reset resets the machine through QMP system_reset, which under
// -no-reboot ends the process; the next boot is a new one.
func (m *Machine) reset(p *process) {
	_ = p.qmp.run("system_reset")
	if !p.wait(10 * time.Second) {
		p.kill()
	}
	m.ended(p)
}

// ended records the end of p's boot and its reason.
func (m *Machine) ended(p *process) {
	p.qmp.close()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.boots {
		if b := &m.boots[i]; b.PID == p.cmd.Process.Pid && b.Ended.IsZero() {
			b.Ended, b.Reason = time.Now(), p.qmp.shutdownReason()
			m.log.Info("qemu: boot ended", "boot", b.N, "pid", b.PID, "reason", b.Reason)
		}
	}
}

// wait reports whether the process exited within d.
func (p *process) wait(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// kill kills the process by its PID and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}
