//go:build fakehw

package demo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
)

// TestUpdateFixesAWrongPassword: a machine enrolled with a wrong BMC
// password fails UNAUTHENTICATED with no MAC; metal.update with another
// wrong password is refused by the BMC and changes nothing (no sealed row
// left behind); with the right one it is saved and the old sealed password
// deleted; metal.recover then takes the node to ready. Before, nothing
// could fix a node's credentials, and recover failed on the missing MAC.
func TestUpdateFixesAWrongPassword(t *testing.T) {
	ctx := ctxFor(t, 4*time.Minute)
	const password = "update-test-pw"
	d := startWith(t, func(c *demo.Config) { c.Machines, c.BMCPassword = 1, password })
	m := d.Rack.Machines()[0]
	creds := func(pw string) *v1.BmcCredentials { return &v1.BmcCredentials{Username: m.BMCUsername, Password: pw} }
	r, err := d.API.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: d.SiteID, PoolId: d.PoolID,
		Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver, Credentials: creds("wrong-1")}}))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Msg.Node.Id
	if err := d.Wait(ctx, m.Name, id, "failed", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	before := node(t, d, id)
	if !strings.Contains(before.LastError, "UNAUTHENTICATED") || len(before.Macs) != 0 {
		t.Fatalf("node after a wrong password = %q, MACs %v; want UNAUTHENTICATED and none", before.LastError, before.Macs)
	}
	secrets := func() int {
		var n int
		if err := d.CP.Store().Pool().QueryRow(ctx, `SELECT count(*) FROM secrets`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rows := secrets()
	update := func(pw string) (*v1.Node, error) {
		r, err := d.API.Metal.Update(ctx, connect.NewRequest(&v1.UpdateNodeRequest{Id: id, Bmc: &v1.Bmc{Credentials: creds(pw)}}))
		if err != nil {
			return nil, err
		}
		return r.Msg.Node, nil
	}
	if _, err := update("wrong-2"); code(err) != "UNAUTHENTICATED" || !strings.Contains(err.Error(), "keeps its BMC settings") {
		t.Errorf("metal.update(wrong password) = %v (%s), want UNAUTHENTICATED saying the node keeps its settings", err, code(err))
	}
	if after := node(t, d, id); after.BmcCredentialsRef != before.BmcCredentialsRef || after.State != "failed" || secrets() != rows {
		t.Errorf("after a refused update: ref %s (was %s), state %s, %d secrets (were %d); want all unchanged",
			after.BmcCredentialsRef, before.BmcCredentialsRef, after.State, secrets(), rows)
	}
	got, err := update(password)
	if err != nil {
		t.Fatalf("metal.update(right password) = %v", err)
	}
	if got.BmcCredentialsRef == before.BmcCredentialsRef || got.State != "failed" || secrets() != rows {
		t.Errorf("after the update: ref %s (was %s), state %s, %d secrets (were %d); want a new ref, failed, the old secret replaced",
			got.BmcCredentialsRef, before.BmcCredentialsRef, got.State, secrets(), rows)
	}
	if _, err := d.API.Metal.Recover(context.Background(), connect.NewRequest(&v1.NodeVerbRequest{NodeId: id})); err != nil {
		t.Fatalf("metal.recover = %v", err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 2*time.Minute); err != nil {
		t.Fatalf("recover after the update: %v", err)
	}
}
