package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/errs"
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

// waitVerb waits until the node is in state want, then until the verb's
// workflow has closed: the workflow records the state before its last
// steps, and the node takes no other verb while it runs (a loaded control
// plane left seconds between the two, and the next verb was refused as
// busy).
func (d *Demo) waitVerb(ctx context.Context, name, node, want string, run *v1.VerbResponse) error {
	if err := d.Wait(ctx, name, node, want, verbTimeout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, verbTimeout)
	defer cancel()
	if err := d.CP.Client().GetWorkflow(ctx, run.WorkflowId, run.RunId).Get(ctx, nil); err != nil {
		return fmt.Errorf("%s: workflow %s of %s: %w", name, run.WorkflowId, node, err)
	}
	return nil
}

// verbTimeout bounds each phase of a machine's loop.
const verbTimeout = 5 * time.Minute

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
// it the control plane only queues more work, so a phase waits longer: with
// 200 at once on a loaded 2-core machine, phases reached Wait's 5-minute
// bound.
const MaxInFlight = 50

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
	for _, m := range d.Rack.Machines() {
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
