package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// echoServer answers each line with the same line, on loopback.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, s string) (string, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, s); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// TestProxyDropAndDelay: the proxy forwards; Drop cuts an open connection
// and refuses new ones for its window, then forwards again; Delay holds
// each chunk.
func TestProxyDropAndDelay(t *testing.T) {
	p, err := Listen(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "one"); got != "one\n" || err != nil {
		t.Fatalf("through the proxy = %q, %v; want one", got, err)
	}

	p.Drop(500 * time.Millisecond)
	if got, err := roundTrip(c, r, "two"); err == nil {
		t.Errorf("on a dropped connection = %q, want an error", got)
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if got, err := roundTrip(c2, bufio.NewReader(c2), "three"); err == nil {
			t.Errorf("a new connection while refusing = %q, want an error", got)
		}
		c2.Close()
	}
	if _, refused := p.Counts(); refused < 1 {
		t.Errorf("refused = %d, want at least 1", refused)
	}

	time.Sleep(600 * time.Millisecond)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	r3 := bufio.NewReader(c3)
	p.Delay(150*time.Millisecond, 5*time.Second)
	began := time.Now()
	if got, err := roundTrip(c3, r3, "four"); got != "four\n" || err != nil {
		t.Fatalf("after the drop's window = %q, %v; want four", got, err)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("a round trip while delayed 150ms a chunk took %s, want at least 300ms (each way)", took)
	}
}

// TestDriverSeedReplays: two drivers with one seed inject the same faults
// in the same order; every kind is hit before any is hit twice; a fault
// that finds nothing is a miss; a restart's failure is reported.
func TestDriverSeedReplays(t *testing.T) {
	run := func(seed uint64) ([]string, *Driver) {
		var got []string
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d := &Driver{Seed: seed, Every: [2]time.Duration{time.Millisecond, 2 * time.Millisecond}, Log: t.Logf}
		for _, name := range []string{"a", "b", "c", "none", "bad"} {
			d.Faults = append(d.Faults, Fault{Name: name, Inject: func(rng *rand.Rand) (string, error) {
				got = append(got, fmt.Sprintf("%s%d", name, rng.IntN(100)))
				if len(got) == 15 {
					cancel()
				}
				if name == "none" {
					return "", nil
				}
				return name, nil
			}, Restart: func() error {
				if name == "bad" {
					return errs.New(errs.Unavailable, "did not come back")
				}
				return nil
			}})
		}
		d.Run(ctx)
		return got, d
	}
	a, d := run(42)
	b, _ := run(42)
	if !slices.Equal(a, b) {
		t.Errorf("faults of seed 42 = %v then %v, want the same", a, b)
	}
	c, _ := run(43)
	if slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same faults %v", a)
	}
	first := map[string]bool{}
	for _, f := range a[:5] {
		first[strings.TrimRight(f, "0123456789")] = true
	}
	if len(first) != 5 {
		t.Errorf("the first five faults = %v, want each kind once", a[:5])
	}
	if m := d.Missed(); !slices.Equal(m, []string{"none"}) {
		t.Errorf("Missed = %v, want [none]", m)
	}
	if e := d.Errors(); len(e) == 0 || !strings.Contains(e[0], "did not come back") {
		t.Errorf("Errors = %v, want bad's restart failure", e)
	}
	s := Summary{Seed: 42, Driver: d, Checks: []Check{{Name: "x"}, {Name: "y", Violations: []string{"node n stuck"}}}}.String()
	for _, want := range []string{"CHAOS_SEED=42", "none 0 (3 found nothing to hit)", "invariant x: held", "invariant y: VIOLATED 1 times", "node n stuck"} {
		if !strings.Contains(s, want) {
			t.Errorf("Summary = %q, want it to say %q", s, want)
		}
	}
}

// TestDriverPatience: a fault that finds nothing to hit tries again every
// Poll within Patience, and a late hit counts as a hit, not a miss.
func TestDriverPatience(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tries := 0
	d := &Driver{Seed: 7, Patience: time.Second, Poll: 10 * time.Millisecond, Log: t.Logf,
		Faults: []Fault{{Name: "ramdisk", Inject: func(*rand.Rand) (string, error) {
			if tries++; tries < 3 {
				return "", nil
			}
			cancel()
			return "ramdisk-1", nil
		}}}}
	d.Run(ctx)
	if tries != 3 || d.Counts()["ramdisk"] != 1 || d.Misses()["ramdisk"] != 0 {
		t.Errorf("tries %d, counts %v, misses %v; want 3 tries, one hit, no miss", tries, d.Counts(), d.Misses())
	}
}
