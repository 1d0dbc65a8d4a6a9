package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/wfresult"
)

// Enroll enrolls an emulated machine by its BMC, as an operator would. The
// BMC password goes inline, so the control plane stores it as a secret://
// reference. An IPMI machine goes to the IPMI pool with its MACs (--macs),
// which its BMC cannot report.
func (d *Demo) Enroll(ctx context.Context, m emulate.MachineInfo) (string, error) {
	node, _, err := d.enroll(ctx, m)
	return node, err
}

func (d *Demo) enroll(ctx context.Context, m emulate.MachineInfo) (string, *v1.VerbResponse, error) {
	pool, macs := d.PoolID, []string(nil)
	if m.BMCDriver == bmc.DriverIPMI {
		pool, macs = d.IPMIPoolID, m.MACs
	}
	r, err := d.API.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: d.SiteID, PoolId: pool, Macs: macs,
		Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver,
			Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: d.cfg.BMCPassword}}}))
	if err != nil {
		return "", nil, fmt.Errorf("%s: metal.enroll: %w", m.Name, err)
	}
	return r.Msg.Node.Id, r.Msg, nil
}

// EnrollReady enrolls the machine and waits until its node is ready and
// its enroll workflow has closed.
func (d *Demo) EnrollReady(ctx context.Context, m emulate.MachineInfo) (string, error) {
	node, run, err := d.enroll(ctx, m)
	if err != nil {
		return "", err
	}
	return node, d.waitVerb(ctx, m.Name, node, "ready", run)
}

// waitVerb waits until the node is in state want and the verb's workflow
// has closed: the workflow records the state before its last steps, and the
// node takes no other verb while it runs (a loaded control plane left
// seconds between the two, and the next verb was refused as busy). The close
// comes from the workflow's result, waited for through the control plane's
// Temporal client as the fleet benchmark and its bare baseline wait for
// theirs (a long poll, backed by describes that find a close Temporal did
// not announce: wfresult), not from polling; the polls (every phasePollEvery)
// print the machine's progress and watch for a stall. There is no bound on
// the whole phase, which in a long queue (1,000 machines on 2 cores) lasts as
// long as the queue does; the phase fails when the machine makes no progress
// for Config.Stall (default DefaultStall), naming the node, its state, its
// newest command and the workflow's pending step.
func (d *Demo) waitVerb(ctx context.Context, name, node, want string, run *v1.VerbResponse) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	closed := make(chan string, 1)
	go func() {
		for {
			err := wfresult.Get(ctx, d.CP.Client(), run.WorkflowId, run.RunId, nil)
			var failed *temporal.WorkflowExecutionError
			switch {
			case ctx.Err() != nil:
				return // the phase ended without it
			case err == nil:
				closed <- ""
				return
			case errors.As(err, &failed): // failed, canceled, terminated or timed out
				closed <- err.Error()
				return
			}
			// Temporal did not answer (restarted, say): the polls watch the
			// phase meanwhile, and describe the workflow's close too.
			select {
			case <-ctx.Done():
				return
			case <-time.After(d.phasePollEvery()):
			}
		}
	}()
	return watchPhase(ctx, name, node, want, d.cfg.Stall, d.phasePollEvery(), closed, func(ctx context.Context, describe bool) (phaseSeen, error) {
		return d.observe(ctx, name, node, run, describe)
	})
}

// DefaultStall is how long a phase of a machine's loop may go without
// progress (Config.Stall's default): no change of the node's state, of its
// newest command's status or attempt, and no new event in its workflow's
// history nor heartbeat of its pending activities. It is the old bound on the
// whole phase, which 11 of 1,000 machines outlived in a long queue.
const DefaultStall = 5 * time.Minute

// phaseSeen is one look at a machine in a phase; any change of it is
// progress.
type phaseSeen struct {
	State, FailedFrom, LastError string
	Command                      string // the newest command: kind (runs on) status, attempt
	Events                       int64  // the verb's workflow's history length
	Pending                      string // its pending activities: type, state, attempt, last heartbeat
	Closed                       bool   // the workflow has closed
	Result                       string // a closed workflow's error, "" when it completed
}

// observe looks at the node and its newest command, and with describe at
// the verb's workflow too (one DescribeWorkflowExecution).
func (d *Demo) observe(ctx context.Context, name, node string, run *v1.VerbResponse, describe bool) (phaseSeen, error) {
	r, err := d.API.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: node}))
	if err != nil {
		return phaseSeen{}, fmt.Errorf("%s: metal.get: %w", name, err)
	}
	n := r.Msg.Node
	s := phaseSeen{State: n.State, FailedFrom: n.FailedFrom, LastError: n.LastError, Command: d.lastCommand(ctx, node)}
	d.progress(name, node, s.State, s.Command)
	if !describe {
		return s, nil
	}
	w, err := d.CP.Client().DescribeWorkflowExecution(ctx, run.WorkflowId, run.RunId)
	if err != nil {
		return phaseSeen{}, fmt.Errorf("%s: workflow %s of %s: %w", name, run.WorkflowId, node, err)
	}
	s.Events = w.WorkflowExecutionInfo.GetHistoryLength()
	for _, a := range w.PendingActivities {
		beat := "none"
		if a.GetLastHeartbeatTime() != nil {
			beat = a.GetLastHeartbeatTime().AsTime().Format(time.RFC3339Nano)
		}
		s.Pending += fmt.Sprintf("%s %s attempt %d, last heartbeat %s; ", a.GetActivityType().GetName(),
			strings.ToLower(a.GetState().String()), a.GetAttempt(), beat)
	}
	if w.WorkflowExecutionInfo.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		s.Closed = true
		if err := d.CP.Client().GetWorkflow(ctx, run.WorkflowId, run.RunId).Get(ctx, nil); err != nil {
			s.Result = err.Error()
		}
	}
	return s, nil
}

// watchPhase looks at a machine every poll until it is in state want and
// its workflow has closed. The close comes on closed (the workflow's error,
// "" when it completed; nil: only from look), which ends the wait for the
// next poll: one more look then sees the state the workflow left. It fails
// when the node fails (having left the state it was in at the start) or is
// retired, when the workflow closes with an error, or when nothing it sees
// changes for stall (DefaultStall when zero). It describes the workflow every
// stall/5, and every poll once the node is in want unless closed will say
// when the workflow closes.
func watchPhase(ctx context.Context, name, node, want string, stall, poll time.Duration, closed <-chan string,
	look func(ctx context.Context, describe bool) (phaseSeen, error)) error {
	if stall <= 0 {
		stall = DefaultStall
	}
	var last phaseSeen
	var since, described time.Time
	first, moved := "", false
	result, heard := "", false // what closed said
	byResult := closed != nil
	for i := 0; ; i++ {
		now := time.Now()
		describe := i == 0 || now.Sub(described) >= stall/5 || (last.State == want && !byResult)
		s, err := look(ctx, describe)
		if err != nil {
			return err
		}
		if describe {
			described = now
		} else {
			s.Events, s.Pending, s.Closed, s.Result = last.Events, last.Pending, last.Closed, last.Result
		}
		if heard {
			s.Closed, s.Result = true, result
		}
		if first == "" {
			first = s.State
		}
		moved = moved || s.State != first
		switch {
		case s.State == want && s.Closed && s.Result == "":
			return nil
		case s.Closed && s.Result != "":
			return errs.New(errs.InvalidState, "%s (%s) is %s: its workflow failed: %s", name, node, s.State, s.Result)
		case (s.State == "failed" && moved) || s.State == "retired":
			return errs.New(errs.InvalidState, "%s (%s) is %s (from %s): %s", name, node, s.State, s.FailedFrom, s.LastError)
		}
		if i == 0 || s != last {
			last, since = s, now
		} else if now.Sub(since) >= stall {
			return errs.New(errs.Unavailable, "%s (%s) made no progress toward %s for %s: it is %s, newest command %q, workflow at %d events, pending %q",
				name, node, want, stall.Round(time.Millisecond), s.State, s.Command, s.Events, strings.TrimSuffix(s.Pending, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (%s) waiting for %s: %w", name, node, want, ctx.Err())
		case result = <-closed:
			heard, closed = true, nil // a nil channel: no second receive
		case <-time.After(poll):
		}
	}
}

// Wait polls the node until it is in state want, reporting each state it
// passes through. Failed is an error once the node has left the state it
// was in when Wait began (so a recover can be waited for from failed).
func (d *Demo) Wait(ctx context.Context, name, node, want string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	first, moved := "", false
	for {
		r, err := d.API.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: node}))
		if err != nil {
			return fmt.Errorf("%s: metal.get: %w", name, err)
		}
		n := r.Msg.Node
		d.progress(name, node, n.State, d.lastCommand(ctx, node))
		if first == "" {
			first = n.State
		}
		moved = moved || n.State != first
		switch {
		case n.State == want:
			return nil
		case (n.State == "failed" && moved) || n.State == "retired":
			return errs.New(errs.InvalidState, "%s (%s) is %s (from %s): %s", name, node, n.State, n.FailedFrom, n.LastError)
		}
		select {
		case <-ctx.Done():
			return errs.New(errs.Unavailable, "%s (%s) did not reach %s in %s; it is %s", name, node, want, timeout, n.State)
		case <-time.After(d.pollEvery()):
		}
	}
}

// progress prints a machine's state and the command it is on when either
// changed since the last print.
func (d *Demo) progress(name, node, state, command string) {
	line := fmt.Sprintf("%-11s %s", state, command)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last = map[string]string{}
	}
	if d.last[node] == line {
		return
	}
	d.last[node] = line
	d.say("%-6s %s  %s", name, node, line)
}

// lastCommand describes the newest command sent to the node.
func (d *Demo) lastCommand(ctx context.Context, node string) string {
	r, err := d.API.Commands.List(ctx, connect.NewRequest(&v1.ListCommandsRequest{NodeId: node}))
	if err != nil || len(r.Msg.Items) == 0 {
		return ""
	}
	c := r.Msg.Items[len(r.Msg.Items)-1]
	s := "→ " + c.Kind + " (" + c.RunsOn + ") " + c.Status
	if c.Attempt > 1 {
		s += fmt.Sprintf(", attempt %d", c.Attempt)
	}
	return s
}

// Loop takes one machine through enroll → ready → deploy → deployed →
// undeploy → ready, returning its node id.
func (d *Demo) Loop(ctx context.Context, m emulate.MachineInfo) (string, error) {
	node, err := d.EnrollReady(ctx, m)
	if err != nil {
		return node, err
	}
	return node, d.DeployAndRelease(ctx, m.Name, node)
}

// DeployAndRelease deploys the demo profile on a ready node and takes it back.
func (d *Demo) DeployAndRelease(ctx context.Context, name, node string) error {
	r, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: node, Profile: d.Profile, ProfileVersion: 1}))
	if err != nil {
		return fmt.Errorf("%s: metal.deploy: %w", name, err)
	}
	if err := d.waitVerb(ctx, name, node, "deployed", r.Msg); err != nil {
		return err
	}
	if r, err = d.API.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: node, Wipe: "quick"})); err != nil {
		return fmt.Errorf("%s: metal.undeploy: %w", name, err)
	}
	return d.waitVerb(ctx, name, node, "ready", r.Msg)
}

// MaxInFlight is how many machines LoopAll takes through the lifecycle at
// once. It is more than keeps the control plane busy (a phase of one machine
// takes about 8 s unloaded, and 2 cores do about 3 phases a second); beyond
// it the control plane only queues more work, so a phase waits longer (with
// 200 at once on a loaded 2-core machine, phases outlived the 5-minute bound
// a phase then had).
const MaxInFlight = 50

// phasePollEvery is how often waitVerb looks at a machine: twice
// pollEvery, as its polls only print progress and watch for a stall (the
// workflow's result says when the phase is over).
func (d *Demo) phasePollEvery() time.Duration { return 2 * d.pollEvery() }

// pollEvery is how often Wait asks for a node: 250 ms for a few machines,
// longer for many, so the demo's polls (a metal.get and a commands.list
// each) stay near 200 requests a second (at 250 ms, 1,000 machines asked
// 8,000 a second).
func (d *Demo) pollEvery() time.Duration {
	return max(250*time.Millisecond, time.Duration(min(d.cfg.Machines, MaxInFlight))*10*time.Millisecond)
}

// LoopAll runs Loop on every machine, MaxInFlight at once, and returns the
// failures.
func (d *Demo) LoopAll(ctx context.Context) (nodes map[string]string, failed []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, MaxInFlight)
	nodes = map[string]string{}
	for _, m := range d.Machines() {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			node, err := d.Loop(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			nodes[m.Name] = node
			if err != nil {
				failed = append(failed, err)
			}
		}()
	}
	wg.Wait()
	return nodes, failed
}
