package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// isolate clears the environment the CLI reads, so a developer's settings do
// not leak into a test.
func isolate(t *testing.T) {
	t.Helper()
	for _, k := range []string{"BETTER_COMPUTE_URL", "BETTER_COMPUTE_TOKEN", "BETTER_COMPUTE_TENANT", "BETTER_COMPUTE_DATA_DIR"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// run runs the CLI against url with the token tok and returns what it printed.
func run(url string, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	full := append([]string{"better-compute", "--url", url, "--token", "tok"}, args...)
	code = Main(context.Background(), full, &out, &errb)
	return out.String(), errb.String(), code
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRequests(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	policy := writeFile(t, dir, "policy.json", `{"hardwareProfile":"emulated-redfish","allowUnverifiedRelease":true,"provisioningCidrs":["10.30.0.0/16"]}`)
	profile := writeFile(t, dir, "profile.json", `{"id":"ubuntu-gpu","version":1,"target":"metal","role":"host",
		"steps":[{"use":"power.setPower","on":"site","with":{"action":"cycle"}}]}`)
	image := writeFile(t, dir, "image.json", `{"name":"ubuntu","source":"https://cache/u.img","digest":"sha256:ab","format":"raw","size":"42"}`)
	tests := []struct {
		args       []string
		procedure  string
		body       map[string]any
		tenantHead string
	}{
		{[]string{"tenants", "create", "acme"}, "/bettercompute.v1.TenantsService/Create", map[string]any{"id": "acme"}, "root"},
		{[]string{"tenants", "list"}, "/bettercompute.v1.TenantsService/List", map[string]any{}, "root"},
		{[]string{"sites", "create", "--kind", "shared", "--region", "lab-1", "--key", "lab-1"}, "/bettercompute.v1.SitesService/Create",
			map[string]any{"tenantId": "root", "kind": "shared", "region": "lab-1", "key": "lab-1"}, "root"},
		{[]string{"sites", "list"}, "/bettercompute.v1.SitesService/List", map[string]any{"tenantId": "root"}, "root"},
		{[]string{"sites", "get", "site_1"}, "/bettercompute.v1.SitesService/Get", map[string]any{"tenantId": "root", "id": "site_1"}, "root"},
		{[]string{"site-tokens", "create", "--site", "site_1", "--ttl", "1h", "--key", "agents"}, "/bettercompute.v1.SiteTokensService/Create",
			map[string]any{"tenantId": "root", "siteId": "site_1", "ttlSeconds": "3600", "key": "agents"}, "root"},
		{[]string{"pools", "create", "--site", "site_1", "--class", "metal-host", "--agent", "none", "--policy-file", policy},
			"/bettercompute.v1.PoolsService/Create", map[string]any{"tenantId": "root", "siteId": "site_1", "class": "metal-host", "agent": "none",
				"policy": map[string]any{"hardwareProfile": "emulated-redfish", "allowUnverifiedRelease": true, "provisioningCidrs": []any{"10.30.0.0/16"}}}, "root"},
		{[]string{"pools", "list", "--site", "site_1"}, "/bettercompute.v1.PoolsService/List", map[string]any{"tenantId": "root", "siteId": "site_1"}, "root"},
		{[]string{"pools", "get", "pool_1"}, "/bettercompute.v1.PoolsService/Get", map[string]any{"tenantId": "root", "id": "pool_1"}, "root"},
		{[]string{"images", "register", "--name", "ubuntu", "--source", "https://cache/u.img", "--digest", "sha256:ab", "--format", "raw",
			"--compression", "zstd", "--size", "1024"}, "/bettercompute.v1.ImagesService/Register",
			map[string]any{"tenantId": "root", "name": "ubuntu", "source": "https://cache/u.img", "digest": "sha256:ab", "format": "raw",
				"compression": "zstd", "size": "1024"}, "root"},
		{[]string{"images", "list"}, "/bettercompute.v1.ImagesService/List", map[string]any{"tenantId": "root"}, "root"},
		{[]string{"images", "get", "img_1"}, "/bettercompute.v1.ImagesService/Get", map[string]any{"tenantId": "root", "id": "img_1"}, "root"},
		{[]string{"profiles", "create", profile}, "/bettercompute.v1.ProfilesService/Create", map[string]any{"tenantId": "root",
			"profile": map[string]any{"id": "ubuntu-gpu", "version": float64(1), "target": "metal", "role": "host",
				"steps": []any{map[string]any{"use": "power.setPower", "on": "site", "with": map[string]any{"action": "cycle"}}}}}, "root"},
		{[]string{"profiles", "get", "ubuntu-gpu", "--profile-version", "2"}, "/bettercompute.v1.ProfilesService/Get",
			map[string]any{"tenantId": "root", "id": "ubuntu-gpu", "version": float64(2)}, "root"},
		{[]string{"profiles", "list"}, "/bettercompute.v1.ProfilesService/List", map[string]any{"tenantId": "root"}, "root"},
		{[]string{"profiles", "validate", "ubuntu-gpu", "--profile-version", "1"}, "/bettercompute.v1.ProfilesService/Validate",
			map[string]any{"tenantId": "root", "id": "ubuntu-gpu", "profileVersion": float64(1)}, "root"},
		{[]string{"profiles", "render", "ubuntu-gpu", "--profile-version", "1"}, "/bettercompute.v1.ProfilesService/Render",
			map[string]any{"tenantId": "root", "id": "ubuntu-gpu", "profileVersion": float64(1)}, "root"},
		{[]string{"profiles", "update", "ubuntu-gpu", "--visibility", "public"}, "/bettercompute.v1.ProfilesService/Update",
			map[string]any{"tenantId": "root", "id": "ubuntu-gpu", "visibility": "public"}, "root"},
		{[]string{"profiles", "update", "ubuntu-gpu", "--profile-version", "2", "--visibility", "private"}, "/bettercompute.v1.ProfilesService/Update",
			map[string]any{"tenantId": "root", "id": "ubuntu-gpu", "profileVersion": float64(2), "visibility": "private"}, "root"},
		{[]string{"profiles", "delete", "ubuntu-gpu"}, "/bettercompute.v1.ProfilesService/Delete",
			map[string]any{"tenantId": "root", "id": "ubuntu-gpu"}, "root"},
		{[]string{"profiles", "delete", "ubuntu-gpu", "--profile-version", "3"}, "/bettercompute.v1.ProfilesService/Delete",
			map[string]any{"tenantId": "root", "id": "ubuntu-gpu", "profileVersion": float64(3)}, "root"},
		{[]string{"hardware-profiles", "list"}, "/bettercompute.v1.HardwareProfilesService/List", map[string]any{}, "root"},
		{[]string{"workflows", "list", "--node", "node_1"}, "/bettercompute.v1.WorkflowsService/List",
			map[string]any{"tenantId": "root", "nodeId": "node_1"}, "root"},
		{[]string{"workflows", "get", "wf-1", "--run-id", "run-1"}, "/bettercompute.v1.WorkflowsService/Get",
			map[string]any{"tenantId": "root", "workflowId": "wf-1", "runId": "run-1"}, "root"},
		{[]string{"workflows", "retry", "wf-1", "--from-step", "03.power.setPower", "--force"}, "/bettercompute.v1.WorkflowsService/Retry",
			map[string]any{"tenantId": "root", "workflowId": "wf-1", "fromStep": "03.power.setPower", "force": true}, "root"},
		{[]string{"api", "images.register", "--data", "@" + image}, "/bettercompute.v1.ImagesService/Register",
			map[string]any{"tenantId": "root", "name": "ubuntu", "source": "https://cache/u.img", "digest": "sha256:ab", "format": "raw", "size": "42"}, "root"},
		{[]string{"api", "sites.get", "--data", `{"id":"site_1","tenantId":"acme"}`}, "/bettercompute.v1.SitesService/Get",
			map[string]any{"tenantId": "acme", "id": "site_1"}, "root"},
		{[]string{"api", "hardwareProfiles.list"}, "/bettercompute.v1.HardwareProfilesService/List", map[string]any{}, "root"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:2], " "), func(t *testing.T) {
			rec, url := newAPI(t)
			args := append([]string{"--tenant", "root"}, tt.args...)
			_, stderr, code := run(url, args...)
			if code != 0 {
				t.Fatalf("Main(%q) = %d, want 0; stderr %q", args, code, stderr)
			}
			calls := rec.all()
			if len(calls) != 1 {
				t.Fatalf("Main(%q) made %d calls, want 1", args, len(calls))
			}
			got := calls[0]
			if got.procedure != tt.procedure {
				t.Errorf("Main(%q) called %s, want %s", args, got.procedure, tt.procedure)
			}
			if diff := cmp.Diff(tt.body, got.body); diff != "" {
				t.Errorf("Main(%q) request body (-want +got):\n%s", args, diff)
			}
			if got.tenant != tt.tenantHead || got.auth != "Bearer tok" {
				t.Errorf("Main(%q) headers = tenant %q auth %q, want %q and %q", args, got.tenant, got.auth, tt.tenantHead, "Bearer tok")
			}
		})
	}
}

func TestNoTenantSendsNone(t *testing.T) {
	isolate(t)
	rec, url := newAPI(t)
	if _, stderr, code := run(url, "sites", "list"); code != 0 {
		t.Fatalf("sites list = %d, want 0; stderr %q", code, stderr)
	}
	got := rec.all()[0]
	if len(got.body) != 0 || got.tenant != "" {
		t.Errorf("sites list without a tenant sent body %v and tenant header %q, want neither", got.body, got.tenant)
	}
}

func TestOutput(t *testing.T) {
	isolate(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sites", "list"},
			"ID      TENANT_ID  KIND       REGION  KEY\n" +
				"site_1  root       shared     lab-1   lab-1\n" +
				"site_2  root       dedicated  lab-2   \n"},
		{[]string{"sites", "get", "site_1"},
			"ID      TENANT_ID  KIND    REGION\nsite_1  root       shared  lab-1\n"},
		{[]string{"sites", "get", "site_1", "-o", "json"},
			"{\n  \"site\": {\n    \"id\": \"site_1\",\n    \"tenantId\": \"root\",\n    \"kind\": \"shared\",\n    \"region\": \"lab-1\"\n  }\n}\n"},
		{[]string{"sites", "create", "--kind", "shared", "--region", "lab-1"},
			"ID      KIND    REGION  CREATED\nsite_1  shared  lab-1   true\n"},
		{[]string{"workflows", "list", "--node", "node_1", "--query", "items[].profileId"}, "metal-enroll\ninspection\n"},
		{[]string{"workflows", "list", "--node", "node_1", "--query", "items[].profileId", "-o", "json"},
			"[\n  \"metal-enroll\",\n  \"inspection\"\n]\n"},
		{[]string{"sites", "list", "--query", "items[0].id"}, "site_1\n"},
		{[]string{"sites", "list", "--query", "items[?kind=='dedicated'].{id: id, region: region}"},
			"ID      REGION\nsite_2  lab-2\n"},
		{[]string{"pools", "list"},
			"ID      SITE_ID  CLASS       AGENT  POLICY.HARDWARE_PROFILE  POLICY.PROVISIONING_CIDRS\n" +
				"pool_1  site_1   metal-host  bcd    emulated-redfish         10.30.0.0/16,10.31.0.0/16\n"},
		{[]string{"hardware-profiles", "list"},
			"ID                DESCRIPTION  DRIVERS.POWER  DRIVERS.MANAGEMENT  DRIVERS.BOOT  DRIVERS.DEPLOY\n" +
				"emulated-redfish  QEMU         redfish        redfish             ipxe          image-stream\n"},
		{[]string{"profiles", "get", "ubuntu-gpu"}, "ID          VERSION  TARGET\nubuntu-gpu  3        metal\n"},
		{[]string{"profiles", "validate", "ubuntu-gpu", "--profile-version", "1"}, "profile ubuntu-gpu version 1 is valid\n"},
		{[]string{"profiles", "render", "ubuntu-gpu", "--profile-version", "1"},
			"INDEX  USE                       RUNS_ON  TIMEOUT  RETRY_SAFE  FROM_STEP         WITH\n" +
				"0      power.setPower            site     2m0s     true                          action=cycle\n" +
				"1      media.insert              site     2m0s     true        render.iso (url)  \n" +
				"2      management.setBootDevice  site     2m0s     true                          device=cd persistent=false\n"},
		{[]string{"profiles", "render", "ubuntu-gpu", "--profile-version", "1", "--query", "steps[2].with"},
			"DEVICE  PERSISTENT\ncd      false\n"},
		{[]string{"profiles", "update", "ubuntu-gpu", "--visibility", "public"},
			"ID          VERSION  VISIBILITY\nubuntu-gpu  1        public\nubuntu-gpu  2        public\n"},
		{[]string{"profiles", "delete", "ubuntu-gpu", "--profile-version", "2", "-o", "json"}, "{\n  \"versions\": [\n    2\n  ]\n}\n"},
		{[]string{"images", "list"}, ""},
		{[]string{"tenants", "create", "acme", "--query", "token"}, "bct_tenant_secret\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, url := newAPI(t)
			stdout, stderr, code := run(url, tt.args...)
			if code != 0 {
				t.Fatalf("Main(%q) = %d, want 0; stderr %q", tt.args, code, stderr)
			}
			if diff := cmp.Diff(tt.want, stdout); diff != "" {
				t.Errorf("Main(%q) stdout (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}
