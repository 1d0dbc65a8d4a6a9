package main

import (
	"os"
	"runtime/debug"
)

// Garbage collector defaults of the control plane (GOGC and GOMEMLIMIT in
// the environment override them). With Go's default, a collection each time
// the heap doubles, the collector took 10.2% of the demo's CPU at 1,000
// machines (pprof: gcBgMarkWorker and gcAssistAlloc); with these, 4.5%. The
// heap then grows to 5× its live size between collections, so the soft limit
// keeps it within the control plane's 2 GiB budget: the whole 1,000-machine
// demo (control plane, Temporal, site agent and rack) peaked at 1.6 GiB.
const (
	gcPercent   = 400
	memoryLimit = 1536 << 20
)

// tuneGC applies the defaults where the environment sets none.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
