package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/store"
)

const (
	secretsPut    = "/bettercompute.v1.TenantSecretsService/Put"
	secretsList   = "/bettercompute.v1.TenantSecretsService/List"
	secretsDelete = "/bettercompute.v1.TenantSecretsService/Delete"
	metalEnroll   = "/bettercompute.v1.MetalService/Enroll"
	metalList     = "/bettercompute.v1.MetalService/List"
	// "root:hunter2-…" in base64, as protojson carries bytes.
	credsB64 = "cm9vdDpodW50ZXIyLXNlY3JldC12YWx1ZQo="
	credsPw  = "hunter2-secret-value"
)

// TestSecretsPutListDelete: put takes a plain word and a value of a known
// shape, replaces an existing name and says so; list shows names, refs and
// times, never the value; another tenant sees nothing of it.
func TestSecretsPutListDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct{ body, field string }{
		{`{"name":"Bmc_1","value":"` + credsB64 + `"}`, "name"},
		{`{"name":"","value":"` + credsB64 + `"}`, "name"},
		{`{"name":"bmc-1"}`, "value"},
		{`{"name":"bmc-1","value":"bm8tY29sb24="}`, "value"},         // "no-colon"
		{`{"name":"bmc-1","value":"eyJ1c2VybmFtZSI6MX0="}`, "value"}, // {"username":1}
	} {
		code, out := e.call(e.root, secretsPut, tc.body)
		if code != 400 || kindOf(out) != "INVALID_INPUT" || field(out) != tc.field {
			t.Errorf("secrets.put(%s) = %d %s %q, want INVALID_INPUT %s", tc.body, code, kindOf(out), field(out), tc.field)
		}
	}
	put := `{"name":"bmc-r12-14","value":"` + credsB64 + `"}`
	if out := e.ok(e.root, secretsPut, put); out["replaced"] == true || nested(out, "secret", "ref") != "secret://root/bmc-r12-14" {
		t.Errorf("secrets.put(bmc-r12-14) = %v, want ref secret://root/bmc-r12-14, not replaced", out)
	}
	if out := e.ok(e.root, secretsPut, put); out["replaced"] != true {
		t.Errorf("secrets.put(bmc-r12-14) again = %v, want replaced", out)
	}
	_, raw := e.call(e.root, secretsList, `{}`)
	items, _ := raw["items"].([]any)
	if len(items) != 1 || nested(items[0].(map[string]any), "name") != "bmc-r12-14" {
		t.Errorf("secrets.list = %v, want bmc-r12-14 alone", raw)
	}
	if s := fmt.Sprint(raw); strings.Contains(s, credsPw) || strings.Contains(s, credsB64) || strings.Contains(s, "value") {
		t.Errorf("secrets.list = %s, want no value", s)
	}
	if l := e.ok(e.acme, secretsList, `{}`); l["items"] != nil {
		t.Errorf("secrets.list as acme = %v, want none", l)
	}
	code, out := e.call(e.acme, secretsDelete, `{"name":"bmc-r12-14"}`)
	if code != 404 || kindOf(out) != "NOT_FOUND" {
		t.Errorf("secrets.delete(root's secret) as acme = %d %s, want NOT_FOUND", code, kindOf(out))
	}
	e.ok(e.root, secretsDelete, `{"name":"bmc-r12-14"}`)
	if code, out := e.call(e.root, secretsDelete, `{"name":"bmc-r12-14"}`); code != 404 {
		t.Errorf("secrets.delete twice = %d %v, want NOT_FOUND", code, out)
	}
}

// TestEnrollChecksReferences: every reference is checked before a node
// exists: vault:// is UNSUPPORTED, a secret:// that names nothing is
// INVALID_INPUT bmc.credentialsRef, and so is an unknown driver or an
// address the driver cannot parse.
func TestEnrollChecksReferences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok(e.acme, secretsPut, `{"name":"bmc-1","value":"`+credsB64+`"}`)
	e.ok(e.root, secretsPut, `{"name":"root-only","value":"`+credsB64+`"}`)
	site := nested(e.ok(e.acme, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := nested(e.ok(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site)), "pool", "id")
	for _, tc := range []struct{ driver, address, ref, kind, field string }{
		{"redfish", "10.0.0.5", "vault://kv/bmc", "UNSUPPORTED", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "secret://acme/bmc-2", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "secret://acme/root-only", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "secret://root/root-only", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "secret://acme/../root/root-only", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "secret://acme/bmc-1/x", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "env://PATH", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "env://BMC", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "env://BCD_SECRET_", "INVALID_INPUT", "bmc.credentialsRef"},
		{"redfish", "10.0.0.5", "env://BCD_SECRET_../PATH", "INVALID_INPUT", "bmc.credentialsRef"},
		{"idrac", "10.0.0.5", "secret://acme/bmc-1", "INVALID_INPUT", "bmc.driver"},
		{"ipmi", "https://10.0.0.5/redfish/v1/Systems/1", "secret://acme/bmc-1", "INVALID_INPUT", "bmc.address"},
		{"redfish", "10.0.0.5/x", "secret://acme/bmc-1", "INVALID_INPUT", "bmc.address"},
	} {
		body := fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:01"],"bmc":{"address":%q,"driver":%q,"credentialsRef":%q}}`,
			site, pool, tc.address, tc.driver, tc.ref)
		code, out := e.call(e.acme, metalEnroll, body)
		if kindOf(out) != tc.kind || field(out) != tc.field {
			t.Errorf("enroll(%s %s %s) = %d %s %q, want %s %s", tc.driver, tc.address, tc.ref, code, kindOf(out), field(out), tc.kind, tc.field)
		}
	}
	if l := e.ok(e.acme, metalList, `{}`); l["items"] != nil {
		t.Errorf("nodes after the refused enrolls = %v, want none", l)
	}
	// An existing name passes the check: without Temporal the API then
	// creates the node and says it cannot start its workflow.
	body := fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:01"],"bmc":{"address":"10.0.0.5","driver":"redfish","credentialsRef":%q}}`,
		site, pool, store.SecretRef("acme", "bmc-1"))
	if _, out := e.call(e.acme, metalEnroll, body); field(out) == "bmc.credentialsRef" {
		t.Errorf("enroll(secret://acme/bmc-1) = %v, want the reference accepted", out)
	}
	items, _ := e.ok(e.acme, metalList, `{}`)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("nodes after enroll(secret://acme/bmc-1) = %v, want one", items)
	}
	node := nested(items[0].(map[string]any), "id")
	code, out := e.call(e.acme, secretsDelete, `{"name":"bmc-1"}`)
	if msg, _ := out["message"].(string); code != 400 || kindOf(out) != "INVALID_STATE" || !strings.Contains(msg, node) {
		t.Errorf("secrets.delete(bmc-1) in use = %d %s %q, want INVALID_STATE naming %s", code, kindOf(out), msg, node)
	}
	// env:// with the site's fixed prefix passes the API's check.
	body = fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:02"],"bmc":{"address":"10.0.0.6","driver":"redfish","credentialsRef":"env://BCD_SECRET_BMC"}}`,
		site, pool)
	if _, out := e.call(e.acme, metalEnroll, body); field(out) == "bmc.credentialsRef" {
		t.Errorf("enroll(env://BCD_SECRET_BMC) = %v, want the reference accepted", out)
	}
}

// TestFailedEnrollWritesNothing: an enroll the store refuses (the BMC is
// enrolled already) leaves no sealed password behind; it once left one a try.
func TestFailedEnrollWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.acme, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := nested(e.ok(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site)), "pool", "id")
	body := fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:01"],"bmc":{"address":"10.0.0.5","driver":"redfish","credentials":{"username":"admin","password":"s3cret"}}}`,
		site, pool)
	e.call(e.acme, metalEnroll, body) // creates the node; no Temporal to start its workflow
	before := rowCounts(t, e.store)
	for i := range 3 {
		if code, out := e.call(e.acme, metalEnroll, body); kindOf(out) != "ALREADY_EXISTS" {
			t.Fatalf("enroll #%d of the same BMC = %d %v, want ALREADY_EXISTS", i+2, code, out)
		}
	}
	if after := rowCounts(t, e.store); after["secrets"] != before["secrets"] || after["metal_nodes"] != before["metal_nodes"] {
		t.Errorf("rows after 3 refused enrolls: secrets %d, nodes %d; want %d, %d",
			after["secrets"], after["metal_nodes"], before["secrets"], before["metal_nodes"])
	}
}
