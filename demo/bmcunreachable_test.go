//go:build fakehw

package demo_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/sdk/converter"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestBMCUnreachableShown: a node whose BMC does not answer says so
// through the real API while its enroll retries: metal get and metal list
// show "BMC H unreachable since T: <its answer>" within one failed
// attempt, and once the breaker is open the attempts fail at once.
func TestBMCUnreachableShown(t *testing.T) {
	d := start(t, 1)
	ctx := ctxFor(t, 3*time.Minute)
	m := d.Rack.Machines()[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing answers there now
	u, err := url.Parse(m.BMCAddress)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = dead
	m.BMCAddress = u.String()
	start := time.Now()
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	want := "BMC " + dead + " unreachable since "
	get := waitProgress(ctx, t, want, func() (string, error) {
		r, err := d.API.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: id}))
		return r.Msg.GetNode().GetProgress(), err
	})
	t.Logf("metal get %.1fs after enroll: %s", time.Since(start).Seconds(), get)
	if !strings.Contains(get, "cannot reach BMC "+dead) {
		t.Errorf("metal get progress = %q, want the BMC's answer", get)
	}
	list := waitProgress(ctx, t, want, func() (string, error) {
		r, err := d.API.Metal.List(ctx, connect.NewRequest(&v1.ListNodesRequest{}))
		for _, n := range r.Msg.GetItems() {
			if n.Id == id {
				return n.Progress, err
			}
		}
		return "", err
	})
	t.Logf("metal list: %s", list)
	open := waitProgress(ctx, t, "the site agent sends it nothing until ", func() (string, error) {
		r, err := d.API.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: id}))
		return r.Msg.GetNode().GetProgress(), err
	})
	t.Logf("breaker open %.1fs after enroll: %s", time.Since(start).Seconds(), open)
	if !strings.Contains(open, "bmc.inspect: retrying (attempt ") || !strings.Contains(open, "DRIVER_ERROR: "+want) {
		t.Errorf("metal get progress with the breaker open = %q, want bmc.inspect retrying, DRIVER_ERROR %s…", open, want)
	}
	// The enroll's workflow shows it too, as its BmcStatus search attribute
	// (relayed from the site through the control plane).
	sa := waitProgress(ctx, t, want, func() (string, error) {
		d, err := d.CP.Client().DescribeWorkflowExecution(ctx, wf.WorkflowID(id), "")
		if err != nil {
			return "", err
		}
		p := d.WorkflowExecutionInfo.GetSearchAttributes().GetIndexedFields()[wf.BMCStatusAttribute.GetName()]
		var s string
		if p != nil {
			err = converter.GetDefaultDataConverter().FromPayload(p, &s)
		}
		return s, err
	})
	t.Logf("BmcStatus %.1fs after enroll: %s", time.Since(start).Seconds(), sa)
}

// waitProgress polls read every 100 ms until its answer holds want.
func waitProgress(ctx context.Context, t *testing.T, want string, read func() (string, error)) string {
	t.Helper()
	seen := ""
	for {
		got, err := read()
		if got != seen { // each progress the node shows, for the record
			t.Logf("progress: %s", got)
			seen = got
		}
		if err == nil && strings.Contains(got, want) {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("progress = %q, %v; want it to hold %q", got, err, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
