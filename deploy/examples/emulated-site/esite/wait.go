package esite

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
)

// wait polls the node until it is in state want, printing each state and
// command it passes through; an error when it fails, retires, or the
// ReadyTimeout passes.
func (s *site) wait(ctx context.Context, name, node, want string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	last, state := "", ""
	for {
		r, err := s.api.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: node}))
		if err == nil {
			n := r.Msg.Node
			state = n.State
			if line := n.State + " " + s.lastCommand(ctx, node); line != last {
				s.say("%-7s %s  %s", name, node, line)
				last = line
			}
			switch {
			case n.State == want:
				return state, nil
			case want == "failed" && n.State == "ready":
				return state, fmt.Errorf("%s (%s) is ready, not failed", name, node)
			case n.State == "failed" || n.State == "retired":
				return state, fmt.Errorf("%s (%s) is %s (from %s): %s", name, node, n.State, n.FailedFrom, n.LastError)
			}
		}
		select {
		case <-ctx.Done():
			return state, fmt.Errorf("%s (%s) did not reach %s within %v; it is %s", name, node, want, s.cfg.ReadyTimeout, state)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// lastCommand describes the newest command sent to the node.
func (s *site) lastCommand(ctx context.Context, node string) string {
	r, err := s.api.Commands.List(ctx, connect.NewRequest(&v1.ListCommandsRequest{NodeId: node}))
	if err != nil || len(r.Msg.Items) == 0 {
		return ""
	}
	c := r.Msg.Items[len(r.Msg.Items)-1]
	line := "→ " + c.Kind + " (" + c.RunsOn + ") " + c.Status
	if c.Attempt > 1 {
		line += fmt.Sprintf(", attempt %d", c.Attempt)
	}
	return line
}

// consoleWatch notes when the machine's console first shows the ramdisk
// starting its agent.
type consoleWatch struct {
	path   string
	mu     sync.Mutex
	joined time.Time
}

func newConsoleWatch(path string) *consoleWatch { return &consoleWatch{path: path} }

func (w *consoleWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		b, _ := os.ReadFile(w.path)
		if strings.Contains(string(b), agentLine) {
			w.mu.Lock()
			w.joined = time.Now()
			w.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *consoleWatch) first() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.joined
}
