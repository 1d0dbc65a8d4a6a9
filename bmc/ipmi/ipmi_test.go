package ipmi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
	"github.com/better-compute/better-compute/errs"
)

// TestPowerAgainstIPMISim drives every power action against ipmi_sim and
// checks each against the chassis_control script's state, the driver's
// PowerState and ipmitool's reading of the same BMC.
func TestPowerAgainstIPMISim(t *testing.T) {
	t.Parallel()
	s := ipmisim.Start(t, ipmisim.Config{})
	d := driverFor(t, s, simPass, Config{})
	ctx := context.Background()
	steps := []struct {
		action bmc.PowerAction
		kind   errs.Kind // of the error, "" for success
		want   bmc.PowerState
		sets   []string // what the chassis_control script was asked to set
	}{
		{bmc.PowerOff, "", bmc.Off, nil}, // already off: nothing sent
		{bmc.PowerOn, "", bmc.On, []string{"power 1"}},
		{bmc.PowerOn, "", bmc.On, nil},
		{bmc.PowerReset, "", bmc.On, []string{"reset 1"}},
		{bmc.PowerCycle, "", bmc.On, []string{"power 0", "power 1"}}, // down, confirmed off, up, confirmed on
		{bmc.PowerNMI, errs.Unsupported, bmc.On, nil},                // ipmi_sim has no diagnostic interrupt
		{bmc.PowerGracefulRestart, errs.Unsupported, bmc.On, nil},    // IPMI has none
		{bmc.PowerGracefulOff, "", bmc.Off, []string{"shutdown 1"}},  // soft shutdown
		{bmc.PowerGracefulOff, "", bmc.Off, nil},                     // twice: nothing
		{bmc.PowerNMI, errs.InvalidState, bmc.Off, nil},              // off: refused before sending
		{bmc.PowerCycle, "", bmc.On, []string{"power 1"}},            // cycle of a machine that is off: up
		{bmc.PowerOff, "", bmc.Off, []string{"power 0"}},             // hard power down
		{bmc.PowerReset, "", bmc.On, []string{"power 1"}},            // reset of a machine that is off: up
	}
	var wantLog []string
	for _, st := range steps {
		res, err := d.SetPower(ctx, st.action)
		if errs.KindOf(err) != st.kind {
			t.Fatalf("SetPower(%s) = %+v, %v, want error kind %q", st.action, res, err, st.kind)
		}
		if err != nil && !strings.Contains(err.Error(), string(st.action)) && st.kind == errs.Unsupported {
			t.Errorf("SetPower(%s) = %v, want the action named", st.action, err)
		}
		if err == nil && (res.State != st.want || res.Reads < 1) {
			t.Errorf("SetPower(%s) = %+v, want state %s", st.action, res, st.want)
		}
		wantLog = append(wantLog, st.sets...)
		if diff := cmp.Diff(wantLog, s.Lines(t, "log")); diff != "" {
			t.Fatalf("chassis_control sets after %s (-want +got):\n%s", st.action, diff)
		}
		checkPower(t, s, d, st.want, string(st.action))
	}
	wantBoots := []string{"none", "none", "none", "none", "none"} // on, reset, cycle's up, cycle's up from off, reset from off
	if diff := cmp.Diff(wantBoots, s.Lines(t, "boots")); diff != "" {
		t.Errorf("boots (-want +got):\n%s", diff)
	}
}

// checkPower checks the machine's power three ways: the script's file, the
// driver's PowerState and ipmitool.
func checkPower(t *testing.T, s *ipmisim.Sim, d *Driver, want bmc.PowerState, after string) {
	t.Helper()
	file := map[bmc.PowerState]string{bmc.On: "1", bmc.Off: "0"}[want]
	if got := s.Read(t, "power"); got != file {
		t.Errorf("machine power after %s = %s, want %s", after, got, file)
	}
	if got, err := d.PowerState(context.Background()); got != want || err != nil {
		t.Errorf("PowerState() after %s = %q, %v, want %q", after, got, err, want)
	}
	if got := s.IPMItool(t, "chassis", "power", "status"); !strings.Contains(got, "Chassis Power is "+string(want)) {
		t.Errorf("ipmitool chassis power status after %s = %q, want %q", after, got, "Chassis Power is "+string(want))
	}
}

// TestLatePowerIsConfirmed: a machine whose power changes land 400 ms
// after the Chassis Control is on or off as asked when SetPower returns,
// and the result says how long that took.
func TestLatePowerIsConfirmed(t *testing.T) {
	t.Parallel()
	const delay = 400 * time.Millisecond
	s := ipmisim.Start(t, ipmisim.Config{PowerDelay: delay})
	d := driverFor(t, s, simPass, Config{})
	for _, st := range []struct {
		action bmc.PowerAction
		want   bmc.PowerState
		waits  int // late changes the action waited for
	}{
		{bmc.PowerOn, bmc.On, 1},
		{bmc.PowerCycle, bmc.On, 2}, // off landed before on was sent, else the on would find it still on
		{bmc.PowerGracefulOff, bmc.Off, 1},
	} {
		start := time.Now()
		res, err := d.SetPower(context.Background(), st.action)
		if err != nil {
			t.Fatalf("SetPower(%s) = %v", st.action, err)
		}
		if got := s.Read(t, "power"); got != map[bmc.PowerState]string{bmc.On: "1", bmc.Off: "0"}[st.want] {
			t.Fatalf("machine power when SetPower(%s) returned = %s, want %s", st.action, got, st.want)
		}
		min := time.Duration(st.waits) * delay
		if res.State != st.want || res.Took < min || res.Took > time.Since(start) || res.Reads < st.waits+1 {
			t.Errorf("SetPower(%s) = %+v, want %s confirmed after ≥ %v", st.action, res, st.want, min)
		}
		if got := s.IPMItool(t, "chassis", "power", "status"); !strings.Contains(got, "is "+string(st.want)) {
			t.Errorf("ipmitool after %s = %q, want %s", st.action, got, st.want)
		}
	}
	if diff := cmp.Diff([]string{"power 1", "power 0", "power 1", "shutdown 1"}, s.Lines(t, "log")); diff != "" {
		t.Errorf("chassis_control sets (-want +got):\n%s", diff)
	}
}

// TestBootDeviceAgainstIPMISim sets every boot device, once and persistent,
// and reads it back through the script's state and ipmitool.
func TestBootDeviceAgainstIPMISim(t *testing.T) {
	t.Parallel()
	s := ipmisim.Start(t, ipmisim.Config{})
	d := driverFor(t, s, simPass, Config{})
	tests := []struct {
		dev      bmc.BootDevice
		script   string // what ipmi_sim passes to chassis_control
		ipmitool string // bootparam get 5's selector line
	}{
		{bmc.BootPXE, "pxe", "Force PXE"},
		{bmc.BootDisk, "default", "Force Boot from default Hard-Drive"},
		{bmc.BootCD, "cdrom", "Force Boot from CD/DVD"},
		{bmc.BootBIOS, "bios", "Force Boot into BIOS Setup"},
	}
	for _, tt := range tests {
		for _, persistent := range []bool{false, true} {
			if err := d.SetBootDevice(context.Background(), tt.dev, persistent); err != nil {
				t.Fatalf("SetBootDevice(%s, %t) = %v", tt.dev, persistent, err)
			}
			if got := s.Read(t, "boot"); got != tt.script {
				t.Errorf("chassis_control boot after SetBootDevice(%s, %t) = %q, want %q", tt.dev, persistent, got, tt.script)
			}
			if got := s.IPMItool(t, "chassis", "bootparam", "get", "5"); !strings.Contains(got, "Boot Device Selector : "+tt.ipmitool) {
				t.Errorf("ipmitool bootparam get 5 after SetBootDevice(%s, %t) = %q, want %q", tt.dev, persistent, got, tt.ipmitool)
			}
		}
	}
	if err := d.SetBootDevice(context.Background(), "floppy", false); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("SetBootDevice(floppy) = %v, want INVALID_INPUT", err)
	}
	// Power on boots from the device last set.
	if _, err := d.SetPower(context.Background(), bmc.PowerOn); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"bios"}, s.Lines(t, "boots")); diff != "" {
		t.Errorf("boots (-want +got):\n%s", diff)
	}
}

// TestInspectAgainstIPMISim reads FRU 0, the system GUID and the firmware
// revision, each cross-checked with ipmitool.
func TestInspectAgainstIPMISim(t *testing.T) {
	t.Parallel()
	s := ipmisim.Start(t, ipmisim.Config{FRU: ipmisim.FRU("ACME Co", "R640-EMU", "SN12345")})
	d := driverFor(t, s, simPass, Config{})
	inv, err := d.Inspect(context.Background())
	if err != nil {
		t.Fatalf("Inspect() = %v", err)
	}
	want := bmc.Inventory{Manufacturer: "ACME Co", Model: "R640-EMU", Serial: "SN12345", ProductUUID: simUUID, BMCFirmware: "2.15"}
	if diff := cmp.Diff(want, inv); diff != "" {
		t.Errorf("Inspect() (-want +got):\n%s", diff)
	}
	fru := s.IPMItool(t, "fru", "print", "0")
	for _, line := range []string{"Product Manufacturer  : " + inv.Manufacturer, "Product Name          : " + inv.Model, "Product Serial        : " + inv.Serial} {
		if !strings.Contains(fru, line) {
			t.Errorf("ipmitool fru print 0 = %q, want %q", fru, line)
		}
	}
	if got := s.IPMItool(t, "mc", "guid"); !strings.Contains(got, "System GUID   : "+inv.ProductUUID) {
		t.Errorf("ipmitool mc guid = %q, want System GUID %s", got, inv.ProductUUID)
	}
	if got := s.IPMItool(t, "mc", "info"); !strings.Contains(got, "Firmware Revision         : "+inv.BMCFirmware) {
		t.Errorf("ipmitool mc info = %q, want Firmware Revision %s", got, inv.BMCFirmware)
	}

	bare := ipmisim.Start(t, ipmisim.Config{}) // no FRU: the rest is still reported
	inv, err = driverFor(t, bare, simPass, Config{}).Inspect(context.Background())
	if err != nil || inv.Serial != "" || inv.ProductUUID != simUUID || inv.BMCFirmware == "" {
		t.Errorf("Inspect() of a BMC without FRU = %+v, %v, want the UUID and firmware only", inv, err)
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	rf, _ := bmc.ParseAddress(bmc.DriverRedfish, "https://10.0.0.1/redfish/v1/Systems/1")
	ip, _ := bmc.ParseAddress(bmc.DriverIPMI, "ipmi://10.0.0.1")
	u := bmc.Credentials{Username: "admin", Password: "pw"}
	tests := []struct {
		cfg   Config
		field string
	}{
		{Config{Address: rf, Credentials: u}, "bmc.driver"},
		{Config{Address: ip}, "bmc.credentials"},
		{Config{Address: ip, Credentials: bmc.Credentials{Username: strings.Repeat("u", 17)}}, "bmc.credentials"},
		{Config{Address: ip, Credentials: bmc.Credentials{Username: "u", Password: strings.Repeat("p", 21)}}, "bmc.credentials"},
		{Config{Address: ip, Credentials: u, CipherSuite: 99}, "bmc.cipherSuite"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		var e *errs.Error
		if !errs.Is(err, errs.InvalidInput) || !errors.As(err, &e) || e.Field != tt.field {
			t.Errorf("New(%+v) = %v, want INVALID_INPUT on %s", tt.cfg, err, tt.field)
		}
		if err != nil && strings.Contains(err.Error(), strings.Repeat("p", 21)) {
			t.Errorf("New() = %q, holds the password", err)
		}
	}
}
