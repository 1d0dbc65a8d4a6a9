package cli

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
)

// waitInterval is how often metal wait reads the node.
const waitInterval = time.Second

func waitCommand() *cli.Command {
	return &cli.Command{
		Name:      "wait",
		Usage:     "wait until a node is in --state; exit 1 when it fails or --timeout passes",
		ArgsUsage: "NODE",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "state", Usage: "the state to wait for, e.g. ready or deployed"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "how long to wait"},
		},
		Action: metalWait,
	}
}

func metalWait(c *cli.Context) error {
	s, err := begin(c)
	if err != nil {
		return err
	}
	if err := s.need("NODE"); err != nil {
		return err
	}
	if err := s.required("state"); err != nil {
		return err
	}
	want := c.String("state")
	if _, err := nodestate.Parse(want); err != nil {
		return errs.Invalid("state", "%v; the states are %v", err, nodestate.States())
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return errs.Invalid("timeout", "--timeout must be positive, not %s", timeout)
	}
	return waitFor(s, s.args[0], want, timeout)
}

// waitFor reads the node every waitInterval until it is in state want, has
// failed, or timeout has passed, and prints the last answer it got. A control
// plane that does not answer is tried again until the timeout.
func waitFor(s *session, id, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last []byte
	seen := ""
	for {
		raw, err := s.call(bettercomputev1connect.MetalServiceGetProcedure, &v1.GetNodeRequest{Id: id})
		switch {
		case errs.Is(err, errs.Unavailable):
			fmt.Fprintf(s.stderr, "note: cannot read node %s (%v); trying again\n", id, err)
		case err != nil:
			return err
		default:
			last = raw
			var resp v1.GetNodeResponse
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &resp); err != nil {
				return errs.Wrap(errs.Internal, err, "decode node %s", id)
			}
			n := resp.GetNode()
			switch {
			case n.GetState() == want:
				return showNode(s, raw)
			case n.GetState() == string(nodestate.Failed):
				return firstErr(showNode(s, raw), &exitError{code: 1, msg: failedMessage(id, n)})
			case refused(n):
				return firstErr(showNode(s, raw), &exitError{code: 1,
					msg: fmt.Sprintf("node %s: %s (see `commands list --node %s`)", id, n.GetLastError(), id)})
			case n.GetState() == seen:
			default:
				seen = n.GetState()
				fmt.Fprintf(s.stderr, "node %s is %s; waiting for %s\n", id, seen, want)
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			msg := fmt.Sprintf("node %s is still %s after %s, not %s", id, seen, timeout, want)
			if last == nil {
				return &exitError{code: 1, msg: fmt.Sprintf("node %s could not be read for %s", id, timeout)}
			}
			return firstErr(showNode(s, last), &exitError{code: 1, msg: msg})
		}
		select {
		case <-s.c.Context.Done():
			return &exitError{code: 1, msg: fmt.Sprintf("stopped waiting for node %s: %v", id, s.c.Context.Err())}
		case <-time.After(min(waitInterval, left)):
		}
	}
}

// refused: the last verb on the node failed without moving it, so the
// node rests where it was with that verb's error, until a verb starts on it.
func refused(n *v1.Node) bool {
	return n.GetLastError() != "" && nodestate.State(n.GetState()).KeepsRefusal()
}

// failedMessage says where a failed node failed and why, and what to do next.
func failedMessage(id string, n *v1.Node) string {
	msg := "node " + id + " failed"
	if n.GetFailedFrom() != "" {
		msg += " from " + n.GetFailedFrom()
	}
	if n.GetLastError() != "" {
		msg += ": " + n.GetLastError()
	}
	return msg + fmt.Sprintf(" (see `commands list --node %s`; `metal recover %s` brings it back)", id, id)
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
