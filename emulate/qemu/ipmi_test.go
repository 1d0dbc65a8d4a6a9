//go:build !fakehw

package qemu

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
	bmcipmi "github.com/better-compute/better-compute/bmc/ipmi"
	"github.com/better-compute/better-compute/internal/testenv"
)

// TestIPMIChassisDrivesQEMU drives a real QEMU behind ipmi_sim through our
// IPMI driver (RMCP+, cipher suite 3), as the site agent does: chassis
// bootdev and power show on the machine's console and in its QEMU
// processes; the machine's own reboot (its PXE boot file resets it) and
// its own end (QEMU killed) are written back, so the BMC, read by our
// driver and by ipmitool, reports what the machine did.
func TestIPMIChassisDrivesQEMU(t *testing.T) {
	for _, tool := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "apt-get install openipmi ipmitool (./run installs them)")
		}
	}
	m := startTestMachine(t, nil, func(c *Config) { c.IPMI = true })
	if m.BMCDriver() != bmc.DriverIPMI || m.BMC() != nil || m.IPMI() == nil {
		t.Fatalf("BMCDriver(), BMC(), IPMI() = %q, %v, %v; want ipmi, nil, ipmi_sim", m.BMCDriver(), m.BMC(), m.IPMI())
	}
	addr, err := bmc.ParseAddress(bmc.DriverIPMI, m.BMCAddress())
	if err != nil {
		t.Fatal(err)
	}
	d, err := bmcipmi.New(bmcipmi.Config{Address: addr, Credentials: bmc.Credentials{Username: "admin", Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustPower := func(_ bmc.PowerResult, err error) { t.Helper(); must(err) }

	// PXE, set persistently as ipmi_sim keeps it anyway: the boot file
	// prints its marker and resets the machine, which boots PXE again.
	must(d.SetBootDevice(ctx, bmc.BootPXE, true))
	mustPower(d.SetPower(ctx, bmc.PowerOn))
	waitFor(t, "the machine's own reboot written back", func() bool { n, _ := m.IPMI().Boots(); return n >= 2 })
	waitFor(t, "the second PXE boot", func() bool { return m.printed(pxeMarker) >= 2 })
	// The disk from the next boot on: the machine's next reboot boots it.
	must(d.SetBootDevice(ctx, bmc.BootDisk, true))
	waitFor(t, "the disk boot after the machine's reboot", func() bool { return m.printed(diskMarker) == 1 && m.Running() != 0 })
	n, dev := m.IPMI().Boots()
	if b := m.Boots(); dev != bmc.BootDisk || len(b) != n || b[n-1].Device != bmc.BootDisk {
		t.Errorf("BMC boots %d, last %q; QEMU boots %+v; want as many, the last from the disk", n, dev, b)
	}
	for _, b := range m.Boots()[:n-1] {
		if b.Device != bmc.BootPXE || b.Reason != "guest-reset" {
			t.Errorf("boot %d = %s (%s), want pxe (guest-reset): the machine rebooted itself", b.N, b.Device, b.Reason)
		}
	}

	// Off by the BMC stops QEMU; on again boots the disk.
	mustPower(d.SetPower(ctx, bmc.PowerOff))
	waitFor(t, "QEMU stopped", func() bool { return m.Running() == 0 })
	mustPower(d.SetPower(ctx, bmc.PowerOn))
	waitFor(t, "the second disk boot", func() bool { return m.printed(diskMarker) == 2 && m.Running() != 0 })

	// The machine ends by itself: the BMC says off, to our driver and to ipmitool.
	must(syscall.Kill(m.Running(), syscall.SIGKILL))
	waitFor(t, "the BMC to report off", func() bool { return m.IPMI().Power() == bmc.Off })
	if st, err := d.PowerState(ctx); err != nil || st != bmc.Off {
		t.Errorf("PowerState() after QEMU died = %q, %v, want off", st, err)
	}
	if out, err := m.IPMI().IPMItool("chassis", "power", "status"); err != nil || strings.TrimSpace(out) != "Chassis Power is off" {
		t.Errorf("ipmitool chassis power status = %q, %v; want Chassis Power is off", out, err)
	}
	want := []string{"boot pxe", "power 1", "boot default", "power 0", "power 1"}
	if diff := cmp.Diff(want, m.BMCCalls()); diff != "" {
		t.Errorf("chassis control log (-want +got):\n%s", diff)
	}
	if pid := m.Running(); pid != 0 {
		t.Errorf("Running() at the end = %d, want 0", pid)
	}
}
