package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	// OutputType is "frame" for -v's framing lines (=== RUN, --- FAIL: …).
	OutputType string
}

// report turns the events of `go test -json` runs into what `go test`
// prints without -v (package results, and the output of failed tests only),
// and remembers every skipped test with its reason for the summary.
type report struct {
	out     io.Writer
	trees   map[string]*tree // by package and top-level test, while running
	skipped []skip
	passed  int
	failed  int
	pkgFail int // packages that failed, tests or not (a build, a panic)
}

// tree is a running top-level test and its subtests.
type tree struct {
	top   string
	tests map[string]*testOut
}

// testOut is what one test printed: its result line ("--- FAIL: …") apart,
// and, in order, its log lines and where each subtest started, so that a
// failure prints as `go test` prints it: result first, subtests indented.
type testOut struct {
	result string
	items  []item
	quiet  bool // passed or skipped: not printed when its parent fails
}

// item is a line of a test's log, or the place where subtest sub ran.
type item struct{ log, sub string }

// skip is a skipped test and why, as it said.
type skip struct{ run, pkg, test, reason string }

func newReport(out io.Writer) *report {
	return &report{out: out, trees: map[string]*tree{}}
}

// read consumes one run's stream; run names it in the summary. Lines that
// are not events are printed as they are.
func (r *report) read(in io.Reader, run string) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.handle(ev, run)
	}
	return sc.Err()
}

func (r *report) handle(ev event, run string) {
	switch {
	case ev.Action == "build-output":
		fmt.Fprint(r.out, ev.Output)
	case ev.Test == "":
		r.pkgEvent(ev)
	default:
		r.testEvent(ev, run)
	}
}

// pkgEvent prints a package's own lines (ok, FAIL, no test files, a panic
// outside any test) but not the bare PASS that only -v shows. A package that
// fails with tests unfinished (a panic, a timeout) prints what they said.
func (r *report) pkgEvent(ev event) {
	switch ev.Action {
	case "output":
		if ev.Output != "PASS\n" {
			fmt.Fprint(r.out, ev.Output)
		}
	case "fail":
		r.pkgFail++
		for key, t := range r.trees {
			if strings.HasPrefix(key, ev.Package+"\x00") {
				r.print(t)
				delete(r.trees, key)
			}
		}
	}
}

func (r *report) testEvent(ev event, run string) {
	top, _, _ := strings.Cut(ev.Test, "/")
	key := ev.Package + "\x00" + top
	t := r.trees[key]
	if t == nil {
		t = &tree{top: top, tests: map[string]*testOut{}}
		r.trees[key] = t
	}
	o := t.test(ev.Test)
	switch ev.Action {
	case "output":
		o.add(ev)
	case "pass":
		r.passed++
		o.quiet = true
	case "skip":
		r.skipped = append(r.skipped, skip{run: run, pkg: ev.Package, test: ev.Test, reason: o.reason()})
		o.quiet = true
	case "fail":
		r.failed++
		if ev.Test == top {
			r.print(t)
		}
	}
	if ev.Test == top && (ev.Action == "pass" || ev.Action == "skip" || ev.Action == "fail") {
		delete(r.trees, key)
	}
}

// test returns the output of test name, new ones marked in their parent's.
func (t *tree) test(name string) *testOut {
	o := t.tests[name]
	if o == nil {
		o = &testOut{}
		t.tests[name] = o
		if i := strings.LastIndex(name, "/"); i > 0 {
			parent := t.test(name[:i])
			parent.items = append(parent.items, item{sub: name})
		}
	}
	return o
}

// add files a line of a test's output: of -v's framing, the result line
// is kept apart and the rest (=== RUN, PAUSE, CONT, NAME) dropped; any other
// line is the test's log.
func (o *testOut) add(ev event) {
	switch {
	case ev.OutputType != "frame":
		o.items = append(o.items, item{log: ev.Output})
	case strings.HasPrefix(strings.TrimSpace(ev.Output), "--- "):
		o.result = strings.TrimSpace(ev.Output) + "\n"
	}
}

// reason is a skipped test's log on one line.
func (o *testOut) reason() string {
	var parts []string
	for _, it := range o.items {
		if it.sub == "" {
			parts = append(parts, strings.TrimSpace(it.log))
		}
	}
	return strings.Join(parts, " ")
}

// print prints a failed test tree as `go test` without -v does.
func (r *report) print(t *tree) { r.printTest(t, t.top, "") }

// printTest prints test name unless it passed or skipped: its result line,
// then its log and its subtests, each indented one step more.
func (r *report) printTest(t *tree, name, indent string) {
	o := t.tests[name]
	if o.quiet {
		return
	}
	if o.result != "" {
		fmt.Fprint(r.out, indent+o.result)
	}
	for _, it := range o.items {
		if it.sub != "" {
			r.printTest(t, it.sub, indent+"    ")
		} else {
			fmt.Fprint(r.out, indent+it.log)
		}
	}
}

// summary prints every skipped test with its reason, grouped by run, and
// the counts.
func (r *report) summary(runs []string) {
	fmt.Fprintln(r.out)
	for _, run := range runs {
		var here []skip
		for _, s := range r.skipped {
			if s.run == run {
				here = append(here, s)
			}
		}
		fmt.Fprintf(r.out, "skipped in go test %s: %d\n", run, len(here))
		for _, s := range here {
			fmt.Fprintf(r.out, "  %s %s: %s\n", s.pkg, s.test, s.reason)
		}
	}
	// The last line is the plain count a CI reader looks for, alone.
	fmt.Fprintf(r.out, "packages failed: %d\n", r.pkgFail)
	fmt.Fprintf(r.out, "tests: %d passed, %d failed, %d skipped\n", r.passed, r.failed, len(r.skipped))
}
