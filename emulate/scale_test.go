//go:build fakehw

package emulate

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

// A rack holds more machines than a /24 has addresses (each BMC listens on a
// loopback port of its own), each with its own BMC; beyond MaxMachines it is
// refused naming the field, with nothing made.
func TestRackScales(t *testing.T) {
	t.Parallel()
	const n = 300
	r := startRack(t, Config{Machines: n, Dir: t.TempDir(), BootURL: "http://127.0.0.1:1", DisksPerMachine: []int64{1 << 30}, Password: "pw"})
	ms := r.Machines()
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.BMCAddress] = true
	}
	if len(ms) != n || len(seen) != n || ms[n-1].Name != "emu-300" {
		t.Fatalf("Machines() = %d machines with %d BMC addresses, the last %q; want %d, %d, emu-300", len(ms), len(seen), ms[len(ms)-1].Name, n, n)
	}
	dir := t.TempDir()
	_, err := Start(t.Context(), Config{Machines: MaxMachines + 1, Dir: dir, BootURL: "http://127.0.0.1:1"})
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.InvalidInput || e.Field != "machines" {
		t.Fatalf("Start(%d machines) = %v, want INVALID_INPUT naming machines", MaxMachines+1, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Start(%d machines) left %d entries in its dir, want none", MaxMachines+1, len(entries))
	}
}

// An idle machine costs its rack no goroutine and no wake-up of its own: a
// BMC tells the machine when it powers it on or off (OnBoot, OnPowerOff).
// A watcher polling each machine's power ten times a second cost an idle
// rack of 1,000 machines 6% of a core.
func TestIdleMachinesRunNothing(t *testing.T) {
	const n = 50
	r := startRack(t, Config{Machines: n, Dir: t.TempDir(), BootURL: "http://127.0.0.1:1", DisksPerMachine: []int64{1 << 20}, Password: "pw"})
	if got := len(r.Machines()); got != n {
		t.Fatalf("Machines() = %d, want %d", got, n)
	}
	buf := make([]byte, 8<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if k := strings.Count(stacks, "better-compute/emulate.(*machine)."); k != 0 {
		t.Errorf("%d goroutine frames of idle machines in a rack of %d (want none):\n%s", k, n, stacks)
	}
}
