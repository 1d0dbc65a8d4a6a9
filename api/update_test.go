package api_test

import (
	"fmt"
	"testing"
)

const metalUpdate = "/bettercompute.v1.MetalService/Update"

// TestUpdateRefusesBeforeAsking: metal.update refuses, before any BMC is
// asked and with nothing written, a request that changes nothing, a bad
// address or reference, both credentials and a reference, and a node a verb
// is working on.
func TestUpdateRefusesBeforeAsking(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.acme, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := nested(e.ok(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site)), "pool", "id")
	e.call(e.acme, metalEnroll, fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:01"],"bmc":{"address":"10.0.0.5","driver":"redfish","credentialsRef":"env://BCD_SECRET_BMC"}}`,
		site, pool))
	node := lastNode(t, e) // enrolling: no Temporal here to run its workflow
	before := rowCounts(t, e.store)
	for _, tc := range []struct{ name, bmc, kind, field string }{
		{"nothing", `{}`, "INVALID_INPUT", "bmc"},
		{"bad address", `{"address":"https://bmc .example"}`, "INVALID_INPUT", "bmc.address"},
		{"bad reference", `{"credentialsRef":"file:///etc/shadow"}`, "INVALID_INPUT", "bmc.credentialsRef"},
		{"env:// outside the site's prefix", `{"credentialsRef":"env://PATH"}`, "INVALID_INPUT", "bmc.credentialsRef"},
		{"another tenant's secret", `{"credentialsRef":"secret://root/bmc-1"}`, "INVALID_INPUT", "bmc.credentialsRef"},
		{"both", `{"credentialsRef":"env://BCD_SECRET_X","credentials":{"username":"a","password":"b"}}`, "INVALID_INPUT", "bmc.credentials"},
		{"a busy node", `{"credentialsRef":"env://BCD_SECRET_X"}`, "INVALID_STATE", ""},
	} {
		code, out := e.call(e.acme, metalUpdate, fmt.Sprintf(`{"id":%q,"bmc":%s}`, node, tc.bmc))
		if kindOf(out) != tc.kind || field(out) != tc.field {
			t.Errorf("metal.update(%s) = %d %s field %q, want %s field %q", tc.name, code, kindOf(out), field(out), tc.kind, tc.field)
		}
	}
	after := rowCounts(t, e.store)
	for table, n := range before {
		if after[table] != n {
			t.Errorf("rows of %s = %d after refused updates, want %d", table, after[table], n)
		}
	}
}
