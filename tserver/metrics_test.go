package tserver

import (
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The server asks for its meter on every metric it records: handing it out
// must cost nothing.
func TestGetMeterIsFree(t *testing.T) {
	p := newMeterProvider(sdkmetric.NewMeterProvider())
	if allocs := testing.AllocsPerRun(100, func() { p.GetMeter() }); allocs != 0 {
		t.Errorf("GetMeter allocates %v times a call, want 0", allocs)
	}
	if p.GetMeter() != p.GetMeter() {
		t.Error("GetMeter returns a different meter each call")
	}
}
