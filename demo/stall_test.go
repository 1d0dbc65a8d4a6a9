//go:build fakehw

package demo_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
)

// A machine whose phase stops moving fails after the stall window with an
// error naming it and the step it is on, long before the phase's old fixed
// 5-minute bound: here its site agent is gone, so the deploy's first site
// step is never picked up.
func TestPhaseStall(t *testing.T) {
	const stall = 5 * time.Second
	d := startWith(t, func(c *demo.Config) { c.Machines, c.Stall = 1, stall })
	m := d.Rack.Machines()[0]
	ctx := ctxFor(t, 3*time.Minute)
	node, err := d.EnrollReady(ctx, m)
	if err != nil {
		t.Fatalf("EnrollReady = %v", err)
	}
	d.Agent.Stop()
	d.Agent = nil
	start := time.Now()
	err = d.DeployAndRelease(ctx, m.Name, node)
	took := time.Since(start)
	if err == nil {
		t.Fatal("a deploy with no site agent went through")
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	for _, want := range []string{m.Name + " (" + node + ")", "no progress toward deployed for 5s", "pending \"", "cache.ensureImage scheduled attempt 1, last heartbeat none"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if took > stall+30*time.Second {
		t.Errorf("failed after %v, want soon after the %v window", took, stall)
	}
	// metal get says why, on the node the deploy has not moved yet: no
	// worker of its site takes the command.
	got := waitProgress(ctx, t, "no worker has taken it for", func() (string, error) {
		r, err := d.API.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: node}))
		if err != nil {
			return "", err
		}
		return r.Msg.Node.Progress, nil
	})
	t.Logf("metal get %v after the deploy: %s", time.Since(start).Round(time.Millisecond), got)
	if want := "(is the agent of site " + d.SiteID + ", bcd site, running and connected?)"; !strings.HasPrefix(got, "cache.ensureImage: ") ||
		!strings.Contains(got, want) {
		t.Errorf("metal get progress = %q, want cache.ensureImage … %s", got, want)
	}
}
