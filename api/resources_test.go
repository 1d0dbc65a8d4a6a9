package api_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestSitesIdempotentByKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.ok(e.root, sitesCreate, `{"kind":"shared","region":"lab-1","key":"lab-1"}`)
	b := e.ok(e.root, sitesCreate, `{"kind":"shared","region":"lab-1","key":"lab-1"}`)
	if nested(a, "site", "id") != nested(b, "site", "id") || b["created"] == true || a["created"] != true {
		t.Errorf("sites.create twice with key lab-1 = %v then %v, want the same site, created once", a, b)
	}
	if !strings.HasPrefix(nested(a, "site", "id"), "site_") {
		t.Errorf("site id = %q, want site_ prefix", nested(a, "site", "id"))
	}
	got := e.ok(e.root, sitesGet, fmt.Sprintf(`{"id":%q}`, nested(a, "site", "id")))
	if nested(got, "site", "region") != "lab-1" {
		t.Errorf("sites.get = %v", got)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.root, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	// acme cannot see root's site, by get or list, nor act in root's tenant.
	code, out := e.call(e.acme, sitesGet, fmt.Sprintf(`{"id":%q}`, site))
	if code != 404 || kindOf(out) != "NOT_FOUND" || strings.Contains(fmt.Sprint(out), "lab-1") {
		t.Errorf("acme sites.get(root's site) = %d %v, want 404 NOT_FOUND without contents", code, out)
	}
	if l := e.ok(e.acme, sitesList, `{}`); l["items"] != nil {
		t.Errorf("acme sites.list = %v, want empty", l)
	}
	code, out = e.call(e.acme, sitesList, `{"tenantId":"root"}`)
	if code != 404 || kindOf(out) != "NOT_FOUND" {
		t.Errorf("acme sites.list(tenant root) = %d %v, want NOT_FOUND", code, out)
	}
	code, out = e.call(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site))
	if code != 404 || kindOf(out) != "NOT_FOUND" {
		t.Errorf("acme pools.create on root's site = %d %v, want NOT_FOUND", code, out)
	}
	// root may act in acme's tenant; an unknown tenant is NOT_FOUND.
	e.ok(e.root, sitesCreate, `{"tenantId":"acme","kind":"dedicated","region":"lab-2"}`)
	if l := e.ok(e.acme, sitesList, `{}`); len(l["items"].([]any)) != 1 {
		t.Errorf("acme sites.list after root created one for it = %v, want 1 item", l)
	}
	code, out = e.call(e.root, sitesList, `{"tenantId":"nobody"}`)
	if code != 404 || kindOf(out) != "NOT_FOUND" {
		t.Errorf("sites.list(tenant nobody) = %d %v, want NOT_FOUND", code, out)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.root, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	big := `{"kind":"shared","region":"` + strings.Repeat("a", 2<<20) + `"}`
	for _, tc := range []struct {
		name, procedure, body, tok string
		code                       int
		kind, field                string
	}{
		{"no token", sitesList, `{}`, "-", 401, "UNAUTHENTICATED", ""},
		{"wrong token", sitesList, `{}`, "bcapi_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 401, "UNAUTHENTICATED", ""},
		{"malformed JSON", sitesCreate, `{"kind":`, "", 400, "INVALID_INPUT", ""},
		{"unknown field", sitesCreate, `{"kind":"shared","region":"x","colour":"red"}`, "", 400, "INVALID_INPUT", ""},
		{"ill-typed field", sitesCreate, `{"kind":7,"region":"x"}`, "", 400, "INVALID_INPUT", ""},
		{"missing field", sitesCreate, `{"region":"x"}`, "", 400, "INVALID_INPUT", "kind"},
		{"oversized body", sitesCreate, big, "", 429, "INVALID_INPUT", ""},
		{"bad region", sitesCreate, `{"kind":"shared","region":"Lab 1"}`, "", 400, "INVALID_INPUT", "region"},
		{"pool unknown hardware profile", poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host","policy":{"hardwareProfile":"nope"}}`, site), "", 400, "INVALID_INPUT", "policy.hardwareProfile"},
		{"pool bad cidr", poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host","policy":{"provisioningCidrs":["10.0.0.1/8"]}}`, site), "", 400, "INVALID_INPUT", "policy.provisioningCidrs[0]"},
		{"pool ipv6 cidr", poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host","policy":{"provisioningCidrs":["fd00::/8"]}}`, site), "", 400, "INVALID_INPUT", "policy.provisioningCidrs[0]"},
		{"pool unknown policy field", poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host","policy":{"trustEverything":true}}`, site), "", 400, "INVALID_INPUT", ""},
		{"pool bad agent", poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host","agent":"puppet"}`, site), "", 400, "INVALID_INPUT", "agent"},
		{"pool unknown site", poolsCreate, `{"siteId":"site_01kbbbbbbbbbbbbbbbbbbbbbbb","class":"metal-host"}`, "", 404, "NOT_FOUND", ""},
		{"image bad digest", imagesReg, `{"source":"http://x/img.zst","digest":"md5:00","format":"raw","compression":"zstd","size":10}`, "", 400, "INVALID_INPUT", "digest"},
		{"image credentials in url", imagesReg, `{"source":"http://u:p@x/img","digest":"sha256:` + strings.Repeat("0", 64) + `","format":"raw","size":10}`, "", 400, "INVALID_INPUT", "source"},
		{"image compressed iso", imagesReg, `{"source":"http://x/a.iso","digest":"sha256:` + strings.Repeat("0", 64) + `","format":"iso","compression":"gzip","size":10}`, "", 400, "INVALID_INPUT", "compression"},
		{"site token ttl", tokCreate, fmt.Sprintf(`{"siteId":%q,"ttlSeconds":5}`, site), "", 400, "INVALID_INPUT", "ttlSeconds"},
		{"profile bad step", profCreate, `{"profile":{"id":"p","version":1,"target":"metal","role":"host","steps":[{"use":"rm -rf"}]}}`, "", 400, "INVALID_INPUT", "profile.steps[0].use"},
		{"unknown tenant", sitesList, `{"tenantId":"ghost"}`, "", 404, "NOT_FOUND", "tenantId"},
	} {
		tok := e.root
		switch tc.tok {
		case "-":
			tok = ""
		case "":
		default:
			tok = tc.tok
		}
		code, out := e.call(tok, tc.procedure, tc.body)
		if code != tc.code || kindOf(out) != tc.kind || (tc.field != "" && field(out) != tc.field) {
			t.Errorf("%s: %s = %d kind %q field %q (%v), want %d %s %q", tc.name, tc.procedure, code, kindOf(out), field(out), out["message"], tc.code, tc.kind, tc.field)
		}
	}
	// Nothing was written by any of them.
	if l := e.ok(e.root, sitesList, `{}`); len(l["items"].([]any)) != 1 {
		t.Errorf("sites after bad input = %v, want only the first", l)
	}
	if l := e.ok(e.root, poolsList, `{}`); l["items"] != nil {
		t.Errorf("pools after bad input = %v, want none", l)
	}
}

func TestPoolsImagesProfiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.root, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := e.ok(e.root, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host","policy":{"hardwareProfile":"emulated-redfish","provisioningCidrs":["10.30.0.0/16"]}}`, site))
	if nested(pool, "pool", "agent") != "bcd" || !strings.HasPrefix(nested(pool, "pool", "id"), "pool_") {
		t.Errorf("pools.create = %v, want agent bcd and a pool_ id", pool)
	}
	img := e.ok(e.root, imagesReg, `{"name":"ubuntu","source":"http://cache/ubuntu.raw.zst","digest":"sha256:`+strings.Repeat("ab", 32)+`","format":"raw","compression":"zstd","size":1048576}`)
	if !strings.HasPrefix(nested(img, "image", "id"), "img_") {
		t.Errorf("images.register = %v", img)
	}
	imgID := nested(img, "image", "id")
	good := `{"profile":{"id":"ubuntu-24.04-gpu-host","version":1,"target":"metal","role":"host","steps":[{"use":"deploy.image","with":{"image":"` + imgID + `"}},{"use":"boot.kexec"}]}}`
	e.ok(e.root, profCreate, good)
	// Steps are resolved before anything is stored: each refusal names the field.
	for _, tc := range []struct{ steps, field string }{
		{`[{"use":"ansible.run"}]`, "profile.steps[0].use"},
		{`[{"use":"boot.kexec"}]`, "profile.steps[0].use"},
		{`[{"use":"power.setPower","with":{"action":"explode"}}]`, "profile.steps[0].with.action"},
		{`[{"use":"power.setPower","with":{"action":"cycle","speed":"fast"}}]`, "profile.steps[0].with.speed"},
		{`[{"use":"management.setBootDevice"}]`, "profile.steps[0].with.device"},
		{`[{"use":"deploy.image","with":{"image":"img_01k5w0000000000000000000000"}}]`, "profile.steps[0].with.image"},
	} {
		body := `{"profile":{"id":"bad","version":1,"target":"metal","role":"host","steps":` + tc.steps + `}}`
		if code, out := e.call(e.root, profCreate, body); kindOf(out) != "INVALID_INPUT" || field(out) != tc.field {
			t.Errorf("profiles.create(%s) = %d %s field %q, want INVALID_INPUT naming %s", tc.steps, code, kindOf(out), field(out), tc.field)
		}
	}
	code, out := e.call(e.root, profCreate, good)
	if code != 409 || kindOf(out) != "ALREADY_EXISTS" {
		t.Errorf("profiles.create same version twice = %d %v, want ALREADY_EXISTS", code, out)
	}
	v := e.ok(e.root, profValidate, `{"id":"ubuntu-24.04-gpu-host","profileVersion":1}`)
	if v["valid"] != true {
		t.Errorf("profiles.validate = %v, want valid", v)
	}
	code, out = e.call(e.root, profValidate, `{"id":"ubuntu-24.04-gpu-host","profileVersion":2}`)
	if code != 404 || kindOf(out) != "NOT_FOUND" {
		t.Errorf("profiles.validate v2 = %d %v, want NOT_FOUND", code, out)
	}
	hw := e.ok(e.root, hwList, `{}`)
	if items := hw["items"].([]any); len(items) != 1 || nested(items[0].(map[string]any), "drivers", "power") != "redfish" {
		t.Errorf("hardwareProfiles.list = %v", hw)
	}
}

// TestEnrollRefusesAnotherTenantsSecret: a secret:// reference names a
// secret of the caller's tenant; nothing is written otherwise.
func TestEnrollRefusesAnotherTenantsSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.acme, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := nested(e.ok(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site)), "pool", "id")
	body := fmt.Sprintf(`{"siteId":%q,"poolId":%q,"bmc":{"address":"10.0.0.5","driver":"redfish","credentialsRef":"secret://root/sec_x"}}`, site, pool)
	code, out := e.call(e.acme, "/bettercompute.v1.MetalService/Enroll", body)
	if code != 400 || kindOf(out) != "INVALID_INPUT" || field(out) != "bmc.credentialsRef" {
		t.Errorf("enroll with root's secret from acme = %d %s %q, want INVALID_INPUT bmc.credentialsRef", code, kindOf(out), field(out))
	}
	if l := e.ok(e.acme, "/bettercompute.v1.MetalService/List", `{}`); l["items"] != nil {
		t.Errorf("nodes after the refused enroll = %v, want none", l)
	}
}
