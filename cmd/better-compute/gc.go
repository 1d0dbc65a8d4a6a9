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
// With the rack in its own process (demo --rack-process, 1,000 of 1,000
// machines, 2 shared cores): the control plane's process (with the site
// agent) peaked at 1630 MiB, PostgreSQL 109 MiB, the rack 938 MiB; with
// GOGC=100 GOMEMLIMIT=off, 723, 97 and 372 MiB (and 1.13 loops/s against
// 1.02, one run each on a loaded machine): the peak here is what the soft
// limit allows the heap, not what the fleet needs.
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
