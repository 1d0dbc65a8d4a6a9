package ipmi

import (
	"context"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
)

// BenchmarkSetPower measures power actions per second against ipmi_sim:
// each is one session, a Chassis Control and the reads that confirm it,
// alternating on and off.
func BenchmarkSetPower(b *testing.B) {
	s := ipmisim.Start(b, ipmisim.Config{})
	d := driverFor(b, s, simPass, Config{})
	actions := []bmc.PowerAction{bmc.PowerOn, bmc.PowerOff}
	n := 0
	for b.Loop() {
		if _, err := d.SetPower(context.Background(), actions[n%2]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "actions/s")
}

// BenchmarkPowerStatus reads the power b.N times through the driver (a
// session, Get Chassis Status, close) and b.N times with ipmitool -I lanplus
// -C 3 (the same exchange, one process each) in the same run, and reports
// both rates and their ratio.
func BenchmarkPowerStatus(b *testing.B) {
	s := ipmisim.Start(b, ipmisim.Config{On: true})
	d := driverFor(b, s, simPass, Config{})
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if st, err := d.PowerState(ctx); err != nil || st != bmc.On {
			b.Fatalf("PowerState() = %q, %v", st, err)
		}
	}
	ours := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for i := 0; i < b.N; i++ {
		s.IPMItool(b, "chassis", "power", "status")
	}
	theirs := time.Since(start)
	b.ReportMetric(float64(b.N)/ours.Seconds(), "reads/s")
	b.ReportMetric(float64(b.N)/theirs.Seconds(), "ipmitool-reads/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "x-ipmitool")
}
