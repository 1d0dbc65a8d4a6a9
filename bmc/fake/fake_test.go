package fake

import (
	"context"
	"errors"
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/google/go-cmp/cmp"
)

func TestFakeBehavesLikeAMachine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := New(bmc.Inventory{Serial: "S1", MACs: []string{"52:54:00:00:00:01"}}, bmc.PowerNMI)
	power := func(a bmc.PowerAction) func() error {
		return func() error { _, err := d.SetPower(ctx, a); return err }
	}
	steps := []struct {
		do   func() error
		want bmc.PowerState
	}{
		{power(bmc.PowerOff), bmc.Off},
		{func() error { return d.SetBootDevice(ctx, bmc.BootPXE, false) }, bmc.Off},
		{power(bmc.PowerOn), bmc.On},
		{power(bmc.PowerOn), bmc.On},
		{power(bmc.PowerCycle), bmc.On},
		{power(bmc.PowerGracefulOff), bmc.Off},
		{power(bmc.PowerReset), bmc.On},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("step %d = %v", i, err)
		}
		if got, _ := d.PowerState(ctx); got != s.want {
			t.Errorf("PowerState() after step %d = %q, want %q", i, got, s.want)
		}
	}
	if diff := cmp.Diff([]bmc.BootDevice{bmc.BootPXE, bmc.BootDisk, bmc.BootDisk}, d.Boots()); diff != "" {
		t.Errorf("Boots() mismatch (-want +got):\n%s", diff)
	}
	if _, err := d.SetPower(ctx, bmc.PowerNMI); !errs.Is(err, errs.Unsupported) {
		t.Errorf("SetPower(nmi) = %v, want UNSUPPORTED", err)
	}
	boom := errs.New(errs.DriverError, "BMC down")
	d.SetErr(Inspect, boom)
	if _, err := d.Inspect(ctx); !errors.Is(err, boom) {
		t.Errorf("Inspect() with an error knob = %v, want %v", err, boom)
	}
	d.SetErr(Inspect, nil)
	if inv, err := d.Inspect(ctx); err != nil || inv.Serial != "S1" {
		t.Errorf("Inspect() = %+v, %v, want serial S1", inv, err)
	}
	if got := d.Calls(SetPower); got != 7 {
		t.Errorf("Calls(SetPower) = %d, want 7", got)
	}
}
