package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// tuneGC sets the collector's defaults unless GOGC or GOMEMLIMIT is set,
// which the runtime has already applied and tuneGC leaves alone.
func TestTuneGC(t *testing.T) {
	prevPercent, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	tuneGC()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GC percent after tuneGC() = %d, want %d", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != memoryLimit {
		t.Errorf("memory limit after tuneGC() = %d, want %d", got, memoryLimit)
	}

	t.Setenv("GOGC", "100")
	t.Setenv("GOMEMLIMIT", "8GiB")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent after tuneGC() with GOGC=100 = %d, want 100 (the environment's)", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("memory limit after tuneGC() with GOMEMLIMIT set = %d, want it untouched", got)
	}
}
