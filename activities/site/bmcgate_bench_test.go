package site

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
)

// BenchmarkBMCPower: power actions per second through the gate against
// one BMC host (ipmi_sim, the emulated Redfish BMC) with 1 and 50 nodes
// behind it calling at once; serialized, the 50 share the one host's rate.
func BenchmarkBMCPower(b *testing.B) {
	for _, nodes := range []int{1, 50} {
		b.Run(fmt.Sprintf("ipmi/nodes=%d", nodes), func(b *testing.B) {
			s := ipmisim.Start(b, ipmisim.Config{On: true})
			benchPower(b, ipmiActivities(NewBMCGate(BMCGateConfig{})), nodes, s.Address(), bmc.DriverIPMI, simCredsRef)
		})
		b.Run(fmt.Sprintf("redfish/nodes=%d", nodes), func(b *testing.B) {
			f := startRedfishFront(b)
			benchPower(b, redfishActivities(NewBMCGate(BMCGateConfig{})), nodes, f.addr, bmc.DriverRedfish, redfishCredsRef)
		})
	}
}

// benchPower runs b.N power actions (on, the machine on: a confirmed
// no-op) spread over nodes callers and reports actions/s.
func benchPower(b *testing.B, a *Activities, nodes int, addr, driver, ref string) {
	ctx := context.Background()
	if err := powerOn(ctx, a, "node_00", addr, driver, ref); err != nil {
		b.Fatal(err)
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := powerOn(ctx, a, fmt.Sprintf("node_%02d", i), addr, driver, ref); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "actions/s")
}

// BenchmarkBMCFaultShown: the time from a BMC that stops answering to the
// node showing "BMC H unreachable since T", with the drivers' default
// timeouts: the first call that fails says it (metal get shows a retrying
// command's last failure), so it is one failed call's duration.
func BenchmarkBMCFaultShown(b *testing.B) {
	b.Run("ipmi", func(b *testing.B) {
		s := ipmisim.Start(b, ipmisim.Config{On: true})
		f := startIPMIFront(b, s.Port())
		a := ipmiActivities(nil)
		a.Drivers[bmc.DriverIPMI] = func(_ context.Context, addr bmc.Address, creds bmc.Credentials) (bmc.Driver, error) {
			return ipmi.New(ipmi.Config{Address: addr, Credentials: creds}) // the defaults bcd site runs with
		}
		benchFaultShown(b, a, "ipmi://"+f.addr, bmc.DriverIPMI, simCredsRef, f.paused.Store)
	})
	b.Run("redfish", func(b *testing.B) {
		f := startRedfishFront(b)
		benchFaultShown(b, redfishActivities(nil), f.addr, bmc.DriverRedfish, redfishCredsRef, f.down.Store)
	})
}

func benchFaultShown(b *testing.B, a *Activities, addr, driver, ref string, fault func(bool)) {
	ctx := context.Background()
	var total time.Duration
	for range b.N {
		a.BMCs = NewBMCGate(BMCGateConfig{})
		if err := powerOn(ctx, a, "node_1", addr, driver, ref); err != nil {
			b.Fatal(err)
		}
		fault(true)
		start := time.Now()
		err := powerOn(ctx, a, "node_1", addr, driver, ref)
		total += time.Since(start)
		fault(false)
		if err == nil || !strings.Contains(err.Error(), "unreachable since") {
			b.Fatalf("call to a silent BMC = %v, want BMC … unreachable since …", err)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-shown")
}
