package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
)

func asErr(err error, e **errs.Error) bool { return errors.As(err, e) }

// started is one agent running against a test relay.
type started struct {
	node  string
	relay *agenttest.Relay
	done  chan struct{}
	err   error // Run's answer, once done is closed
}

// startAgent runs Run against relay in a goroutine; the test's cleanup
// cancels it and waits for it to return.
func startAgent(t *testing.T, relay *agenttest.Relay, cfg Config, bootURL string) *started {
	t.Helper()
	node := ids.New(ids.Node)
	cfg.Cmdline = relay.Cmdline(node, bootURL)
	cfg.PollWait = 2 * time.Second
	cfg.ProgressEvery = 20 * time.Millisecond
	cfg.MaxBackoff = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{node: node, relay: relay, done: make(chan struct{})}
	go func() { s.err = Run(ctx, cfg); close(s.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	relay.WaitFor(t, 10*time.Second, "the join", func() bool { return len(relay.Joins()) > 0 })
	return s
}
