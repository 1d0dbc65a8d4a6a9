// Command gotest runs `go test -json` and prints what `go test` prints
// without -v (each package's result and the output of failed tests only),
// then a summary of every skipped test with its reason, so that a test
// skipped for want of root, a tool or shared data is seen. It is the
// Taskfile's test target:
//
//	go run ./internal/gotest [go test flags and packages] [-- another run's] …
//
// Each run separated by "--" is a `go test -json` of its own, in order; the
// first that fails ends the runs. It exits 1 if a run failed. A run that
// begins with -C DIR runs in DIR: a module of its own such as
// deploy/examples/autoinstall.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(1)
	}
}

// run runs each group of args as `go test -json <group>` and reports to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	r := newReport(out)
	var names []string
	var failed error
	for group := range splitRuns(args) {
		name := strings.Join(group, " ")
		names = append(names, name)
		if failed = goTest(ctx, group, r, name); failed != nil {
			break
		}
	}
	r.summary(names)
	if failed == nil && r.failed > 0 {
		failed = fmt.Errorf("%d tests failed", r.failed)
	}
	return failed
}

// splitRuns yields the groups of args between "--".
func splitRuns(args []string) func(yield func([]string) bool) {
	return func(yield func([]string) bool) {
		for len(args) > 0 {
			i := slices.Index(args, "--")
			if i < 0 {
				i = len(args)
			}
			if i > 0 && !yield(args[:i]) {
				return
			}
			args = args[min(i+1, len(args)):]
		}
	}
}

// goTest runs one `go test -json` into r. An interrupt is passed on to go
// test, whose partial results are still read and summarised.
func goTest(ctx context.Context, args []string, r *report, name string) error {
	cmd := exec.CommandContext(ctx, "go", testArgs(args)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	readErr := r.read(stdout, name)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("go test %s: %w", name, err)
	}
	return readErr
}

// testArgs is go's command line for one run: go test's -C must come first.
func testArgs(args []string) []string {
	if len(args) >= 2 && args[0] == "-C" {
		return append([]string{"test", "-C", args[1], "-json"}, args[2:]...)
	}
	return append([]string{"test", "-json"}, args...)
}
