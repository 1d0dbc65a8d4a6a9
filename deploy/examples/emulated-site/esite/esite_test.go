package esite

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/internal/testenv"
)

// TestMain is also the site's process: Run starts this test binary again
// inside the site namespace, and Inner runs the site there.
func TestMain(m *testing.M) {
	Inner()
	os.Exit(m.Run())
}

// wantBMC is what the BMC of a machine taken through the whole loop must
// have been asked, in order, written out rather than derived from the
// workflows: enrollment boots the ramdisk (PXE once, power on) and powers
// off; the deploy boots the ramdisk again, then the profile's steps boot
// the disk once and power-cycle into the OS; the undeploy boots the
// ramdisk from the running OS (a power cycle) and powers off.
var wantBMC = []string{
	"boot:Pxe/Once", "power:On", "power:ForceOff", // enroll → ready
	"boot:Pxe/Once", "power:On", "boot:Hdd/Once", "power:PowerCycle", // deploy
	"boot:Pxe/Once", "power:PowerCycle", "power:ForceOff", // undeploy
}

// wantBoots are the QEMU processes of that loop: the device each booted
// from and how it ended (QMP quit is power off; system_reset a restart).
var wantBoots = []string{"pxe(host-qmp-quit)", "pxe(host-qmp-system-reset)", "disk(host-qmp-system-reset)", "pxe(host-qmp-quit)"}

// wantIPMI is what ipmi_sim asked the chassis control of an IPMI machine
// taken through the same loop to set: the same steps in IPMI's terms (a
// boot device is "pxe" or "default", the disk; no native power cycle is
// sent: the driver powers off, sees it off, and powers on).
var wantIPMI = []string{
	"boot pxe", "power 1", "power 0", // enroll → ready
	"boot pxe", "power 1", "boot default", "power 0", "power 1", // deploy
	"boot pxe", "power 0", "power 1", "power 0", // undeploy
}

// wantIPMIBoots are the devices of its QEMU processes. How a boot ended by
// a power cycle shows depends on whether the power loop looked between the
// off and the on (quit) or not (system_reset); either is the machine
// restarted, so only the devices are compared, and that the last was quit.
var wantIPMIBoots = []string{"pxe", "pxe", "disk", "pxe"}

// wantDiscoveryBMC is what the BMC of a machine found by PXE discovery
// must have been asked: metal.ensureRamdisk boots it into PXE with no boot
// entry (PXE once, power on), so its firmware's DHCP request shows its MAC
// under its UUID; once the MAC is its (confirmed, or trusted), the
// enrollment boots the ramdisk (PXE once, a power cycle) and powers off.
var wantDiscoveryBMC = []string{"boot:Pxe/Once", "power:On", "boot:Pxe/Once", "power:PowerCycle", "power:ForceOff"}

// wantDiscoveryBoots: the discovery boot ends by the power cycle, the
// ramdisk boot by the power off.
var wantDiscoveryBoots = []string{"pxe(host-qmp-system-reset)", "pxe(host-qmp-quit)"}

// TestEmulatedSite takes QEMU machines through the whole loop by their
// BMCs, for real: enrolled, they PXE-boot (proxy DHCP and TFTP from our
// site agent beside a dnsmasq that leases) into iPXE and the ramdisk over
// HTTP, which sends the inventory and quick-wipes the disk file (ready);
// deployed, the OS image the test builds (mkimage.sh) is written to the
// disk and the machine boots it from the disk, its console saying so;
// undeployed, the disk is wiped again (ready). Machines whose BMC tells no
// MAC are enrolled by product UUID and found by PXE discovery (confirmed,
// or on a trusting pool), to ready. A machine behind ipmi_sim goes
// through the whole loop by the ipmi driver. `./run test` runs the IPMI
// BIOS machine and the confirmed BIOS one (CIMachines); BC_ESITE=full
// (task emulated-site) all five.
func TestEmulatedSite(t *testing.T) {
	cfg := Config{RamdiskDir: filepath.Join("..", "..", "..", "..", "build", "ramdisk"), Dir: t.TempDir(),
		ReadyTimeout: 6 * time.Minute}
	if os.Getenv("BC_ESITE") != "full" {
		cfg.Machines = CIMachines()
	}
	if need, fix := Check(withDefaults(cfg)); need != "" {
		testenv.Missing(t, need, fix)
	}
	cfg.Image = buildImage(t, withDefaults(cfg).RamdiskDir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := Run(ctx, cfg, &out)
	t.Logf("the site's output:\n%s", out.String())
	if err != nil {
		t.Errorf("Run() = %v", err)
	}
	if len(res.Machines) != len(withDefaults(cfg).Machines) {
		t.Fatalf("Run() measured %d machines, want %d", len(res.Machines), len(withDefaults(cfg).Machines))
	}
	for _, m := range res.Machines {
		t.Logf("%s (%s): enroll → ready %v (power-on → ramdisk joined %v), deploy → OS up %v, undeploy → ready %v", m.Name, m.Firmware,
			m.EnrollToReady.Round(100*time.Millisecond), m.PowerOnToJoin.Round(100*time.Millisecond),
			m.DeployToOSUp.Round(100*time.Millisecond), m.UndeployToReady.Round(100*time.Millisecond))
		if m.State != "ready" || !m.DiskZero || m.PowerOnToJoin <= 0 {
			t.Errorf("%s: state %q, disk file zero %v, power-on → join %v; want ready, true, > 0 (%s)",
				m.Name, m.State, m.DiskZero, m.PowerOnToJoin, m.Error)
		}
		spec := specOf(withDefaults(cfg).Machines, m.Name)
		if spec.Discovery != "" {
			checkDiscovered(t, spec, m)
			continue
		}
		if m.DeployToOSUp <= 0 {
			t.Errorf("%s: deploy → OS up %v, want > 0", m.Name, m.DeployToOSUp)
		}
		if spec.IPMI {
			checkIPMI(t, m)
			continue
		}
		if diff := cmp.Diff(wantBMC, m.BMCCalls); diff != "" {
			t.Errorf("%s: BMC calls (-want +got):\n%s", m.Name, diff)
		}
		if diff := cmp.Diff(wantBoots, m.Boots); diff != "" {
			t.Errorf("%s: boots (-want +got):\n%s", m.Name, diff)
		}
	}
	if t.Failed() {
		logTails(t, cfg.Dir)
	}
}

// buildImage builds the OS image with mkimage.sh, from the ramdisk's
// kernel.
func buildImage(t *testing.T, ramdiskDir string) string {
	t.Helper()
	for tool, pkg := range ImageTools {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "apt-get install "+pkg+" (./run installs it)")
		}
	}
	img := filepath.Join(t.TempDir(), "os.raw.zst")
	out, err := exec.Command("bash", filepath.Join("..", "mkimage.sh"), img, filepath.Join(ramdiskDir, "vmlinuz")).CombinedOutput()
	if err != nil {
		t.Fatalf("mkimage.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	return img
}

// logTails prints the end of every log and console the run left, and
// before it each ramdisk's reboot with the 20 lines that led to it (an
// earlier boot's, which the end of a console no longer shows).
func logTails(t *testing.T, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	more, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	for _, f := range append(files, more...) {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if strings.Contains(l, "better-compute ramdisk: rebooting in") {
				t.Logf("%s (a ramdisk reboot, line %d):\n%s", f, i+1, strings.Join(lines[max(0, i-20):i+1], "\n"))
			}
		}
		t.Logf("%s (last lines):\n%s", f, strings.Join(lines[max(0, len(lines)-60):], "\n"))
	}
}

// checkIPMI checks a machine behind ipmi_sim: its chassis control was
// asked the loop's sets, QEMU booted the devices they chose, and ipmitool
// (not our driver) reads the power off at the end.
func checkIPMI(t *testing.T, m MachineResult) {
	t.Helper()
	t.Logf("%s: chassis control log %v, boots %v, ipmitool: %q", m.Name, m.BMCCalls, m.Boots, m.IPMIPowerStatus)
	if diff := cmp.Diff(wantIPMI, m.BMCCalls); diff != "" {
		t.Errorf("%s: chassis control log (-want +got):\n%s", m.Name, diff)
	}
	var devices []string
	for _, b := range m.Boots {
		dev, _, _ := strings.Cut(b, "(")
		devices = append(devices, dev)
	}
	if diff := cmp.Diff(wantIPMIBoots, devices); diff != "" {
		t.Errorf("%s: boot devices (-want +got):\n%s", m.Name, diff)
	}
	if n := len(m.Boots); n == 0 || !strings.HasSuffix(m.Boots[n-1], "(host-qmp-quit)") {
		t.Errorf("%s: boots %v, want the last ended by QMP quit (powered off)", m.Name, m.Boots)
	}
	if m.IPMIPowerStatus != "Chassis Power is off" {
		t.Errorf("ipmitool chassis power status = %q, want Chassis Power is off", m.IPMIPowerStatus)
	}
}

// checkDiscovered checks a machine whose BMC told no MAC: its node learnt
// the machine's one MAC from its PXE boot, confirmed by the test
// (DiscoverConfirm: metal discovered showed it as the node's candidate,
// with the client UUID the firmware sent) or taken at once (trusted).
func checkDiscovered(t *testing.T, spec Spec, m MachineResult) {
	t.Helper()
	mac := m.MAC
	t.Logf("%s: discovery %s, candidate %q, client UUID (option 97) %q, MACs at ready %v, BMC calls %v, boots %v",
		m.Name, spec.Discovery, m.Candidate, m.ClientUUID, m.MACs, m.BMCCalls, m.Boots)
	if mac == "" || !cmp.Equal(m.MACs, []string{mac}) {
		t.Errorf("%s: node MACs at ready = %v, want [%s]", m.Name, m.MACs, mac)
	}
	if spec.Discovery == DiscoverConfirm && m.Candidate != mac {
		t.Errorf("%s: metal discovered candidate %q, want %s", m.Name, m.Candidate, mac)
	}
	// Option 97 is the SMBIOS UUID, its first three fields in either byte
	// order depending on the firmware.
	if m.ClientUUID != m.UUID && m.ClientUUID != mixedEndian(m.UUID) {
		t.Errorf("%s: client UUID %q, want the product UUID %s in either byte order", m.Name, m.ClientUUID, m.UUID)
	}
	if diff := cmp.Diff(wantDiscoveryBMC, m.BMCCalls); diff != "" {
		t.Errorf("%s: BMC calls (-want +got):\n%s", m.Name, diff)
	}
	if diff := cmp.Diff(wantDiscoveryBoots, m.Boots); diff != "" {
		t.Errorf("%s: boots (-want +got):\n%s", m.Name, diff)
	}
}

// mixedEndian is the UUID with its first three fields byte-swapped
// (SMBIOS's little-endian encoding of them, read as text).
func mixedEndian(uuid string) string {
	f := strings.Split(uuid, "-")
	if len(f) != 5 {
		return ""
	}
	for i := range 3 {
		var b strings.Builder
		for j := len(f[i]) - 2; j >= 0; j -= 2 {
			b.WriteString(f[i][j : j+2])
		}
		f[i] = b.String()
	}
	return strings.Join(f, "-")
}

func specOf(specs []Spec, name string) Spec {
	for _, s := range specs {
		if s.Name == name {
			return s
		}
	}
	return Spec{}
}

// TestEmulatedSiteUnplugged: a QEMU machine whose NIC's link is down from
// power-on never sends a PXE request. With a 20 s boot stall on the site
// agent, its enrollment ends failed within minutes, not hours, after 3
// ramdisk boots, its lastError naming the milestone it stopped at and the
// fix. A site of its own (the short stall must not hurry the other
// machines); about a minute, run by ./run test too.
func TestEmulatedSiteUnplugged(t *testing.T) {
	cfg := Config{RamdiskDir: filepath.Join("..", "..", "..", "..", "build", "ramdisk"), Dir: t.TempDir(),
		ReadyTimeout: 5 * time.Minute, BootStall: 20 * time.Second, Machines: []Spec{UnpluggedMachine()}}
	if need, fix := Check(withDefaults(cfg)); need != "" {
		testenv.Missing(t, need, fix)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := Run(ctx, cfg, &out)
	t.Logf("the site's output:\n%s", out.String())
	if err != nil || len(res.Machines) != 1 {
		t.Fatalf("Run() = %d machines, %v; want 1, nil", len(res.Machines), err)
	}
	m := res.Machines[0]
	t.Logf("%s: enroll → failed %v: %s", m.Name, m.EnrollToFailed.Round(100*time.Millisecond), m.LastError)
	if m.State != "failed" || m.EnrollToFailed > 4*time.Minute {
		t.Errorf("%s: %s after %v, want failed within 4m", m.Name, m.State, m.EnrollToFailed)
	}
	for _, want := range []string{"BOOT_STALLED", "3 ramdisk boots stalled", `stopped at "armed"`, "boot order", m.MAC} {
		if !strings.Contains(m.LastError, want) {
			t.Errorf("%s: lastError = %q, want it to mention %q", m.Name, m.LastError, want)
		}
	}
	if pxe := countPrefix(m.Boots, "pxe("); pxe != 3 {
		t.Errorf("%s: %d PXE boots (%v), want 3", m.Name, pxe, m.Boots)
	}
	if t.Failed() {
		logTails(t, cfg.Dir)
	}
}

func countPrefix(items []string, prefix string) int {
	n := 0
	for _, s := range items {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}
