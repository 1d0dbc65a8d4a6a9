package redfishbmc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	bmcredfish "github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/errs"
	"github.com/google/go-cmp/cmp"
)

// driver returns the Redfish driver for b, addressed by its system URL the way
// operators enroll one.
func driver(t *testing.T, b *BMC, user, pass string, session bool) *bmcredfish.Driver {
	t.Helper()
	addr, err := bmc.ParseAddress(bmc.DriverRedfish, strings.Replace(b.SystemURL(), "http://", "redfish+http://", 1))
	if err != nil {
		t.Fatalf("ParseAddress(%q) = %v", b.SystemURL(), err)
	}
	d, err := bmcredfish.New(bmcredfish.Config{Address: addr, Credentials: bmc.Credentials{Username: user, Password: pass}, BasicAuth: !session})
	if err != nil {
		t.Fatalf("redfish.New() = %v", err)
	}
	t.Cleanup(func() {
		d.Logout(context.Background())
		_ = d.Close()
	})
	return d
}

func TestDriverPower(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		b := start(t, Config{MockupDir: mockup})
		d := driver(t, b, testUser, testPass, false)
		steps := []struct {
			action    bmc.PowerAction
			wantPower bmc.PowerState
			wantBoots int
		}{
			{bmc.PowerOff, bmc.Off, 0},  // already off: nothing
			{bmc.PowerOn, bmc.On, 1},    // boots
			{bmc.PowerOn, bmc.On, 1},    // twice: nothing
			{bmc.PowerCycle, bmc.On, 2}, // PowerCycle, or ForceOff+On where PowerCycle is not allowed
			{bmc.PowerReset, bmc.On, 3}, // ForceRestart
			{bmc.PowerGracefulRestart, bmc.On, 4},
			{bmc.PowerNMI, bmc.On, 4},
			{bmc.PowerGracefulOff, bmc.Off, 4}, // GracefulShutdown
			{bmc.PowerGracefulOff, bmc.Off, 4}, // twice: nothing
			{bmc.PowerCycle, bmc.On, 5},        // cycle of an off machine powers it on
			{bmc.PowerOff, bmc.Off, 5},
		}
		for _, s := range steps {
			if _, err := d.SetPower(ctx, s.action); err != nil {
				t.Fatalf("SetPower(%s) = %v", s.action, err)
			}
			got, err := d.PowerState(ctx)
			if err != nil || got != s.wantPower {
				t.Errorf("PowerState() after %s = %q, %v, want %q", s.action, got, err, s.wantPower)
			}
			if st := b.State(); st.Boots != s.wantBoots {
				t.Errorf("State().Boots after %s = %d, want %d", s.action, st.Boots, s.wantBoots)
			}
		}
		st := b.State()
		if st.Resets["GracefulShutdown"] != 1 || st.Resets["GracefulRestart"] != 1 || st.Resets["Nmi"] != 1 || st.Resets["ForceRestart"] != 1 {
			t.Errorf("State().Resets = %v, want one GracefulShutdown, GracefulRestart, Nmi and ForceRestart", st.Resets)
		}
		if _, err := d.SetPower(ctx, bmc.PowerNMI); !errs.Is(err, errs.InvalidState) {
			t.Errorf("SetPower(nmi) on an off machine = %v, want INVALID_STATE", err)
		}
	})
}

func TestDriverUnsupportedAction(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		b := start(t, Config{MockupDir: mockup, PoweredOn: true, ResetTypes: []string{"On", "ForceOff", "ForceRestart"}})
		d := driver(t, b, testUser, testPass, false)
		for _, a := range []bmc.PowerAction{bmc.PowerNMI, bmc.PowerGracefulOff, bmc.PowerGracefulRestart} {
			_, err := d.SetPower(ctx, a)
			if !errs.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), string(a)) {
				t.Errorf("SetPower(%s) = %v, want UNSUPPORTED naming the action", a, err)
			}
		}
		if _, err := d.SetPower(ctx, bmc.PowerCycle); err != nil {
			t.Errorf("SetPower(cycle) without PowerCycle = %v, want ForceOff then On", err)
		}
		if got := b.State().Resets; got["ForceOff"] != 1 || got["On"] != 1 {
			t.Errorf("State().Resets after cycle = %v, want one ForceOff and one On", got)
		}
	})
}

func TestDriverBootOverride(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		ctx := context.Background()
		boots := make(chan bmc.BootDevice, 10)
		b := start(t, Config{MockupDir: mockup, OnBoot: func(dev bmc.BootDevice) { boots <- dev }})
		d := driver(t, b, testUser, testPass, true)
		for range 2 { // safe to call twice
			if err := d.SetBootDevice(ctx, bmc.BootPXE, false); err != nil {
				t.Fatalf("SetBootDevice(pxe, once) = %v", err)
			}
		}
		if st := b.State(); st.BootTarget != "Pxe" || st.BootEnabled != "Once" {
			t.Errorf("State() boot = %s/%s, want Pxe/Once", st.BootTarget, st.BootEnabled)
		}
		if _, err := d.SetPower(ctx, bmc.PowerOn); err != nil {
			t.Fatalf("SetPower(on) = %v", err)
		}
		if got := waitBoot(t, boots); got != bmc.BootPXE {
			t.Errorf("OnBoot after SetBootDevice(pxe)+on = %q, want pxe", got)
		}
		if st := b.State(); st.BootEnabled != "Disabled" {
			t.Errorf("State().BootEnabled after the boot = %q, want Disabled (Once consumed)", st.BootEnabled)
		}
		if _, err := d.SetPower(ctx, bmc.PowerReset); err != nil {
			t.Fatalf("SetPower(reset) = %v", err)
		}
		if got := waitBoot(t, boots); got != bmc.BootDisk {
			t.Errorf("OnBoot after the override was consumed = %q, want disk", got)
		}
		if err := d.SetBootDevice(ctx, bmc.BootCD, true); err != nil {
			t.Fatalf("SetBootDevice(cd, persistent) = %v", err)
		}
		for range 2 {
			if _, err := d.SetPower(ctx, bmc.PowerCycle); err != nil {
				t.Fatalf("SetPower(cycle) = %v", err)
			}
			if got := waitLastBoot(t, boots); got != bmc.BootCD {
				t.Errorf("OnBoot with a Continuous cd override = %q, want cd", got)
			}
		}
		if st := b.State(); st.Sessions != 1 || st.Logins != 1 {
			t.Errorf("State() sessions, logins = %d, %d, want 1, 1 (one session, kept between operations)", st.Sessions, st.Logins)
		}
		d.Logout(ctx)
		if st := b.State(); st.Sessions != 0 {
			t.Errorf("State().Sessions after Logout = %d, want 0", st.Sessions)
		}
	})
}

// waitLastBoot waits for a boot and drains any more (a ForceOff+On cycle boots once,
// PowerCycle once; both must boot from the override).
func waitLastBoot(t *testing.T, boots <-chan bmc.BootDevice) bmc.BootDevice {
	t.Helper()
	d := waitBoot(t, boots)
	for {
		select {
		case d = <-boots:
		default:
			return d
		}
	}
}

func TestDriverBootDeviceUnsupported(t *testing.T) {
	t.Parallel()
	b := start(t, Config{BootTargets: []string{"None", "Pxe", "Hdd"}})
	d := driver(t, b, testUser, testPass, false)
	err := d.SetBootDevice(context.Background(), bmc.BootBIOS, false)
	if !errs.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "bios") {
		t.Errorf("SetBootDevice(bios) = %v, want UNSUPPORTED naming the device", err)
	}
}

func TestDriverInspect(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		b := start(t, Config{MockupDir: mockup, Serial: "SN-0001", CPUs: 2, CPUThreads: 32, MemoryBytes: 64 << 30, Firmware: "9.9.9"})
		d := driver(t, b, testUser, testPass, false)
		for range 2 {
			inv, err := d.Inspect(context.Background())
			if err != nil {
				t.Fatalf("Inspect() = %v", err)
			}
			if diff := cmp.Diff(testMACs(), inv.MACs); diff != "" {
				t.Errorf("Inspect().MACs mismatch (-want +got):\n%s", diff)
			}
			if inv.ProductUUID != testUUID || inv.Serial != "SN-0001" {
				t.Errorf("Inspect() uuid, serial = %q, %q, want %q, SN-0001", inv.ProductUUID, inv.Serial, testUUID)
			}
			if inv.Manufacturer == "" || inv.Model == "" || inv.CPUCount == 0 || inv.MemoryBytes == 0 || inv.BMCFirmware == "" {
				t.Errorf("Inspect() = %+v, want manufacturer, model, CPUs, memory and BMC firmware", inv)
			}
			if mockup == "" {
				want := bmc.Inventory{Manufacturer: "better-compute", Model: "Emulated Server", Serial: "SN-0001", ProductUUID: testUUID,
					MACs: testMACs(), CPUCount: 2, CPUThreads: 32, MemoryBytes: 64 << 30, BMCFirmware: "9.9.9"}
				if diff := cmp.Diff(want, inv); diff != "" {
					t.Errorf("Inspect() mismatch (-want +got):\n%s", diff)
				}
			}
		}
	})
}

func TestDriverWrongPassword(t *testing.T) {
	t.Parallel()
	eachTree(t, func(t *testing.T, mockup string) {
		b := start(t, Config{MockupDir: mockup})
		for _, session := range []bool{false, true} {
			d := driver(t, b, testUser, "not-the-password", session)
			_, err := d.SetPower(context.Background(), bmc.PowerOn)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Unauthenticated || !strings.Contains(e.Msg, "401") ||
				!strings.Contains(e.Msg, "credentials") || !strings.Contains(e.Msg, "127.0.0.1") {
				t.Errorf("SetPower(on) with a wrong password (session %t) = %v, want UNAUTHENTICATED naming the BMC, 401 and the credentials", session, err)
			}
			if err != nil && strings.Contains(err.Error(), "not-the-password") {
				t.Errorf("SetPower(on) error %q holds the password", err)
			}
		}
		if b.State().Power != bmc.Off {
			t.Errorf("State().Power = %q after refused requests, want off", b.State().Power)
		}
	})
}

func TestDriverSystemDiscovery(t *testing.T) {
	t.Parallel()
	b := start(t, Config{})
	ctx := context.Background()
	root, _ := bmc.ParseAddress(bmc.DriverRedfish, "redfish+http://"+strings.TrimPrefix(b.URL(), "http://"))
	d, _ := bmcredfish.New(bmcredfish.Config{Address: root, Credentials: bmc.Credentials{Username: testUser, Password: testPass}})
	if _, err := d.PowerState(ctx); err != nil {
		t.Errorf("PowerState() with no system in the address = %v, want the only system", err)
	}
	wrong := root
	wrong.SystemID = "nope"
	d, _ = bmcredfish.New(bmcredfish.Config{Address: wrong, Credentials: bmc.Credentials{Username: testUser, Password: testPass}})
	if _, err := d.PowerState(ctx); !errs.Is(err, errs.InvalidInput) {
		t.Errorf("PowerState() for system %q = %v, want INVALID_INPUT", wrong.SystemID, err)
	}
	_ = b.Close()
	if _, err := d.PowerState(ctx); !errs.Is(err, errs.DriverError) || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("PowerState() of a stopped BMC = %v, want DRIVER_ERROR saying it cannot reach it", err)
	}
}
