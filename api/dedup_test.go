package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/store"
)

// TestEnrollOneNodePerMachine: a machine enrolled again under another
// spelling of its BMC address, or with the product UUID of a live node, is
// ALREADY_EXISTS naming the existing node and writes nothing; inspection
// that finds a node to be a machine already enrolled is refused the same
// way. Before, https://10.0.0.5:443 created a second node for 10.0.0.5.
func TestEnrollOneNodePerMachine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.acme, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := nested(e.ok(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site)), "pool", "id")
	enroll := func(mac, address, uuid string) (int, map[string]any) {
		return e.call(e.acme, metalEnroll, fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":[%q],"productUuid":%q,"bmc":{"address":%q,"driver":"redfish","credentialsRef":"env://BCD_SECRET_BMC"}}`,
			site, pool, mac, uuid, address))
	}
	// No Temporal here: each enroll writes its node, then answers UNAVAILABLE.
	enroll("b8:ce:f6:00:00:01", "10.0.0.5", "4c4c4544-0000-0000-0000-000000000001")
	first := lastNode(t, e)
	before := rowCounts(t, e.store)
	for _, tc := range []struct{ address, uuid string }{
		{"https://10.0.0.5:443", ""},
		{"redfish+https://[::ffff:10.0.0.5]/", ""},
		{"10.0.0.6", "4C4C4544-0000-0000-0000-000000000001"},
	} {
		code, out := enroll("b8:ce:f6:00:00:02", tc.address, tc.uuid)
		if msg, _ := out["message"].(string); kindOf(out) != "ALREADY_EXISTS" || !strings.Contains(msg, first) {
			t.Errorf("enroll(%s, uuid %q) = %d %s %q, want ALREADY_EXISTS naming %s", tc.address, tc.uuid, code, kindOf(out), msg, first)
		}
	}
	if after := rowCounts(t, e.store); after["metal_nodes"] != before["metal_nodes"] {
		t.Errorf("nodes after refused enrolls = %d, want %d", after["metal_nodes"], before["metal_nodes"])
	}
	// A node enrolled without a product UUID whose inspection finds the first
	// machine's: refused naming it, and the node keeps no UUID.
	enroll("b8:ce:f6:00:00:03", "http://10.0.0.5", "")
	second := lastNode(t, e)
	err := e.store.RecordFacts(context.Background(), "acme", second, store.NodeFacts{ProductUUID: "4C4C4544-0000-0000-0000-000000000001"})
	if errs.KindOf(err) != errs.AlreadyExists || !strings.Contains(err.Error(), first) {
		t.Errorf("RecordFacts(the first machine's UUID) = %v, want ALREADY_EXISTS naming %s", err, first)
	}
	if n, _ := e.store.GetNode(context.Background(), "acme", second); n.ProductUUID != "" {
		t.Errorf("node %s product UUID = %q after the refused facts, want none", second, n.ProductUUID)
	}
}

// lastNode returns the id of acme's newest node.
func lastNode(t *testing.T, e *env) string {
	t.Helper()
	items, _ := e.ok(e.acme, metalList, `{}`)["items"].([]any)
	if len(items) == 0 {
		t.Fatal("metal.list = no nodes, want the enrolled one")
	}
	return nested(items[len(items)-1].(map[string]any), "id")
}

// TestEnrollKeepsAddresses: enroll's --addresses are stored on the node (in
// one spelling) and shown; they were validated and then dropped.
func TestEnrollKeepsAddresses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.acme, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := nested(e.ok(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site)), "pool", "id")
	e.call(e.acme, metalEnroll, fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:01"],"addresses":["10.20.1.14","::ffff:10.20.1.15"],"bmc":{"address":"10.0.0.5","driver":"redfish","credentialsRef":"env://BCD_SECRET_BMC"}}`,
		site, pool))
	items, _ := e.ok(e.acme, metalList, `{}`)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("metal.list = %v, want one node", items)
	}
	if got := fmt.Sprint(items[0].(map[string]any)["addresses"]); got != "[10.20.1.14 10.20.1.15]" {
		t.Errorf("metal.list addresses = %s, want [10.20.1.14 10.20.1.15]", got)
	}
}
