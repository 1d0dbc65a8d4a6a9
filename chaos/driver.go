package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// SeedEnv names the variable that replays a run: CHAOS_SEED=<seed>.
const SeedEnv = "CHAOS_SEED"

// Seed is CHAOS_SEED when set (INVALID_INPUT when it is not a number), else
// a new random seed.
func Seed() (uint64, error) {
	s := os.Getenv(SeedEnv)
	if s == "" {
		return rand.Uint64(), nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errs.Invalid(SeedEnv, "%s=%q is not an unsigned integer", SeedEnv, s)
	}
	return n, nil
}

// Fault is one kind of thing the driver does to the system: kill -9 a
// process of a kind (Restart starts it again after the downtime), or
// inject a network fault (Restart nil: the fault heals by itself).
type Fault struct {
	Name string
	// Inject kills or breaks; it returns what it hit (a process name), or
	// "" when there was nothing to hit just then (no ramdisk running).
	Inject  func(rng *rand.Rand) (string, error)
	Restart func() error
	// Network faults are counted apart from kills in the summary.
	Network bool
}

// Driver injects Faults one at a time, at random intervals, each kind in
// turn in an order the seed shuffles (so every kind is hit once before any
// is hit twice), until its context ends. Everything random comes from the
// seed: the same seed gives the same sequence of faults, intervals and
// downtimes (the lifecycles' own timing is not the seed's, so where in a
// workflow a fault lands can differ between replays).
type Driver struct {
	Seed   uint64
	Faults []Fault
	// Every is the range of the pause between faults; Down the range of
	// how long a killed process stays dead (or a network fault lasts).
	Every, Down [2]time.Duration
	// Patience is how long a fault that found nothing to hit (no ramdisk
	// running just then) keeps trying, every Poll, before the driver moves
	// on to the next kind; 0 tries once.
	Patience, Poll time.Duration
	Log            func(format string, args ...any)

	mu     sync.Mutex
	counts map[string]int // per fault name: injections that hit something
	misses map[string]int // injections that found nothing to hit in their Patience
	errs   []string
}

// Run injects faults until ctx ends, then returns with every killed
// process restarted.
func (d *Driver) Run(ctx context.Context) {
	rng := rand.New(rand.NewPCG(d.Seed, d.Seed^0x9e3779b97f4a7c15))
	d.mu.Lock()
	d.counts, d.misses = map[string]int{}, map[string]int{}
	d.mu.Unlock()
	var deck []int
	for ctx.Err() == nil {
		if len(deck) == 0 {
			deck = rng.Perm(len(d.Faults))
		}
		f := d.Faults[deck[0]]
		deck = deck[1:]
		pause, down := between(rng, d.Every), between(rng, d.Down)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		d.inject(ctx, f, rng, down)
	}
}

// inject does one fault: inject (again every Poll for up to Patience
// while it finds nothing to hit), wait the downtime, restart. The fault's
// own randomness comes from one draw of rng, so how many tries it took
// does not change the faults after it.
func (d *Driver) inject(ctx context.Context, f Fault, rng *rand.Rand, down time.Duration) {
	frng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	giveUp := time.Now().Add(d.Patience)
	var hit string
	for {
		var err error
		if hit, err = f.Inject(frng); err != nil {
			d.fail("%s: %v", f.Name, err)
			return
		}
		if hit != "" {
			break
		}
		poll := max(d.Poll, 10*time.Millisecond)
		if time.Now().Add(poll).After(giveUp) {
			d.mu.Lock()
			d.misses[f.Name]++
			d.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
	d.mu.Lock()
	d.counts[f.Name]++
	d.mu.Unlock()
	d.Log("chaos: %s %s, down %s", f.Name, hit, down.Round(time.Millisecond))
	time.Sleep(down)
	if f.Restart == nil {
		return
	}
	if err := f.Restart(); err != nil {
		d.fail("restart after %s %s: %v", f.Name, hit, err)
	}
}

func (d *Driver) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.Log("chaos: %s", msg)
	d.mu.Lock()
	d.errs = append(d.errs, msg)
	d.mu.Unlock()
}

// Counts are the faults that hit something, by name.
func (d *Driver) Counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return clone(d.counts)
}

// Misses are the injections that found nothing to hit, by name.
func (d *Driver) Misses() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return clone(d.misses)
}

// Errors are the injections and restarts that failed.
func (d *Driver) Errors() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}

// Missed are the fault kinds never injected (hits zero): a run that must
// hit every kind fails naming these.
func (d *Driver) Missed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, f := range d.Faults {
		if d.counts[f.Name] == 0 {
			out = append(out, f.Name)
		}
	}
	return out
}

// Summary is what the harness prints after a run.
type Summary struct {
	Seed       uint64
	Lifecycles int // completed: ready → deploy → deployed → undeploy → ready (the first of a machine from enroll)
	Wanted     int // machines × loops; a run goes on past it until every fault kind was hit
	Took       time.Duration
	Driver     *Driver
	Checks     []Check
}

// Check is one invariant's result: Violations empty means it held.
type Check struct {
	Name       string
	Violations []string
}

func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: seed %d (replay: %s=%d)\n", s.Seed, SeedEnv, s.Seed)
	fmt.Fprintf(&b, "chaos: lifecycles %d (wanted at least %d) in %s\n", s.Lifecycles, s.Wanted, s.Took.Round(time.Second))
	counts := s.Driver.Counts()
	var kills, faults []string
	for _, f := range s.Driver.Faults {
		e := fmt.Sprintf("%s %d", f.Name, counts[f.Name])
		if m := s.Driver.Misses()[f.Name]; m > 0 {
			e += fmt.Sprintf(" (%d found nothing to hit)", m)
		}
		if f.Network {
			faults = append(faults, e)
		} else {
			kills = append(kills, e)
		}
	}
	fmt.Fprintf(&b, "chaos: kills -9: %s\n", strings.Join(kills, ", "))
	fmt.Fprintf(&b, "chaos: network faults: %s\n", strings.Join(faults, ", "))
	for _, e := range s.Driver.Errors() {
		fmt.Fprintf(&b, "chaos: driver error: %s\n", e)
	}
	for _, c := range s.Checks {
		if len(c.Violations) == 0 {
			fmt.Fprintf(&b, "chaos: invariant %s: held\n", c.Name)
			continue
		}
		fmt.Fprintf(&b, "chaos: invariant %s: VIOLATED %d times\n", c.Name, len(c.Violations))
		for _, v := range c.Violations {
			fmt.Fprintf(&b, "chaos:   %s\n", v)
		}
	}
	return b.String()
}

func between(rng *rand.Rand, r [2]time.Duration) time.Duration {
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])))
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
