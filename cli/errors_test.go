package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestErrors(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	notJSON := writeFile(t, dir, "policy.txt", "hardwareProfile: emulated-redfish\n")
	missing := filepath.Join(dir, "missing.json")
	tests := []struct {
		args   []string
		stdout string
		stderr string // a prefix of what is printed
		code   int
		calls  int
	}{
		{args: []string{"sites", "get", "site_missing"}, stderr: "error: NOT_FOUND: site site_missing not found\n", code: 1, calls: 1},
		{args: []string{"sites", "create", "--kind", "weird", "--region", "r"},
			stderr: "error: INVALID_INPUT: kind must be shared or dedicated (field kind)\n", code: 2, calls: 1},
		{args: []string{"sites", "get", "site_forbidden"}, stderr: "error: PERMISSION_DENIED: not yours\n", code: 1, calls: 1},
		{args: []string{"sites", "create", "--region", "r"},
			stderr: "error: INVALID_INPUT: --kind is required (see better-compute sites create --help) (field kind)\n", code: 2},
		{args: []string{"sites", "get"}, stderr: "error: INVALID_INPUT: missing ID; usage: better-compute sites get ID (field id)\n", code: 2},
		{args: []string{"sites", "get", "a", "b"}, stderr: "error: INVALID_INPUT: unexpected argument \"b\"", code: 2},
		{args: []string{"sites", "list", "--bogus"}, stderr: "error: INVALID_INPUT: flag provided but not defined: -bogus", code: 2},
		{args: []string{"sites", "get", "site_1", "--bogus"}, stderr: "error: INVALID_INPUT: flag provided but not defined: --bogus", code: 2},
		// A global option after the command: said where it goes, not "not defined".
		{args: []string{"sites", "list", "--url", "http://cp:7780"},
			stderr: "error: INVALID_INPUT: --url is a global option: give it before the command (better-compute --url … sites list), or set BETTER_COMPUTE_URL (field url)\n", code: 2},
		{args: []string{"sites", "list", "--token=t"},
			stderr: "error: INVALID_INPUT: --token is a global option: give it before the command (better-compute --token … sites list), or set BETTER_COMPUTE_TOKEN (field token)\n", code: 2},
		{args: []string{"frobnicate"}, stderr: "error: INVALID_INPUT: unknown command \"frobnicate\"", code: 2},
		{args: []string{"sites", "frobnicate"}, stderr: "error: INVALID_INPUT: unknown command \"frobnicate\"", code: 2},
		{args: []string{"sites", "list", "-o", "yaml"}, stderr: "error: INVALID_INPUT: -o must be json or table, not \"yaml\" (field output)\n", code: 2},
		{args: []string{"sites", "list", "--query", "items[.id"}, stderr: "error: INVALID_INPUT: bad JMESPath expression", code: 2},
		{args: []string{"site-tokens", "create", "--site", "s", "--ttl", "soon"}, stderr: "error: INVALID_INPUT: --ttl \"soon\" is neither", code: 2},
		{args: []string{"pools", "create", "--site", "s", "--class", "c", "--policy-file", missing},
			stderr: "error: INVALID_INPUT: file " + missing + " does not exist (field policy-file)\n", code: 2},
		{args: []string{"pools", "create", "--site", "s", "--class", "c", "--policy-file", notJSON},
			stderr: "error: INVALID_INPUT: " + notJSON + " is not JSON", code: 2},
		{args: []string{"pools", "create", "--site", "s", "--class", "c", "--agent", "maybe"},
			stderr: "error: INVALID_INPUT: --agent must be bcd or none", code: 2},
		{args: []string{"api", "images.frobnicate"}, stderr: "error: INVALID_INPUT: unknown method \"images.frobnicate\"; known methods: ", code: 2},
		{args: []string{"api", "images.register", "--data", "@" + missing},
			stderr: "error: INVALID_INPUT: file " + missing + " does not exist (field data)\n", code: 2},
		{args: []string{"api", "images.register", "--data", `{"name":`}, stderr: "error: INVALID_INPUT: --data is not JSON", code: 2},
		{args: []string{"api", "images.register", "--data", `{"nmae":"x"}`},
			stderr: "error: INVALID_INPUT: --data is not a valid bettercompute.v1.RegisterImageRequest", code: 2},
		{args: []string{"profiles", "validate", "broken", "--profile-version", "1"},
			stdout: "FIELD         MESSAGE\nsteps[1].use  unknown step acme.frobnicate\n",
			stderr: "error: profile broken version 1 is not valid: 1 problem(s)\n", code: 1, calls: 1},
		{args: []string{"profiles", "validate", "broken"}, stderr: "error: INVALID_INPUT: --profile-version is required", code: 2},
		{args: []string{"profiles", "render", "broken"}, stderr: "error: INVALID_INPUT: --profile-version is required", code: 2},
		{args: []string{"profiles", "update", "ubuntu-gpu"}, stderr: "error: INVALID_INPUT: --visibility is required", code: 2},
		{args: []string{"profiles", "delete", "in-use"},
			stderr: "error: INVALID_STATE: profile \"in-use\" (every version) is deployed on node_1; undeploy them first\n", code: 1, calls: 1},
		{args: []string{"site-tokens", "create", "--site", "site_1", "--ttl", "3600", "--key", "issued", "--out", filepath.Join(dir, "tok")},
			stderr: "error: ALREADY_EXISTS: the site token for key \"issued\" (stk_1) was already issued and its secret cannot be shown again", code: 1, calls: 1},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			rec, url := newAPI(t)
			stdout, stderr, code := run(url, tt.args...)
			if code != tt.code {
				t.Errorf("Main(%q) = %d, want %d", tt.args, code, tt.code)
			}
			if !strings.HasPrefix(stderr, tt.stderr) {
				t.Errorf("Main(%q) stderr = %q, want prefix %q", tt.args, stderr, tt.stderr)
			}
			if stdout != tt.stdout {
				t.Errorf("Main(%q) stdout = %q, want %q", tt.args, stdout, tt.stdout)
			}
			if n := len(rec.all()); n != tt.calls {
				t.Errorf("Main(%q) made %d calls, want %d", tt.args, n, tt.calls)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "tok")); !os.IsNotExist(err) {
		t.Errorf("site-tokens create of an issued key left %s behind (stat: %v), want no file", filepath.Join(dir, "tok"), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tok.tmp-*")); len(left) != 0 {
		t.Errorf("site-tokens create left temporary files %v", left)
	}
}

func TestUnknownMethodListsKnown(t *testing.T) {
	isolate(t)
	_, url := newAPI(t)
	_, stderr, _ := run(url, "api", "nope.nope")
	for _, m := range []string{"images.register", "siteTokens.create", "hardwareProfiles.list", "workflows.get"} {
		if !strings.Contains(stderr, m) {
			t.Errorf("api nope.nope stderr = %q, want it to list %s", stderr, m)
		}
	}
}

func TestServerDown(t *testing.T) {
	isolate(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	_, stderr, code := run(url, "sites", "list")
	if code != 1 || !strings.HasPrefix(stderr, "error: UNAVAILABLE: cannot reach the control plane at "+url) {
		t.Errorf("sites list against a closed port = %d, %q; want 1 and UNAVAILABLE", code, stderr)
	}
}

func TestTokenDiscovery(t *testing.T) {
	isolate(t)
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "root-token"), []byte("bct_root_from_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		auth   string
		stderr string
		code   int
	}{
		{name: "data-dir flag", args: []string{"--data-dir", dataDir}, auth: "Bearer bct_root_from_file"},
		{name: "data-dir env", env: map[string]string{"BETTER_COMPUTE_DATA_DIR": dataDir}, auth: "Bearer bct_root_from_file"},
		{name: "token env wins", env: map[string]string{"BETTER_COMPUTE_DATA_DIR": dataDir, "BETTER_COMPUTE_TOKEN": "bct_env"}, auth: "Bearer bct_env"},
		{name: "token flag wins", args: []string{"--data-dir", dataDir, "--token", "bct_flag"}, auth: "Bearer bct_flag"},
		{name: "nothing", args: []string{"--data-dir", empty}, code: 1,
			stderr: "error: UNAUTHENTICATED: no API token: set BETTER_COMPUTE_TOKEN (or --token), or set BETTER_COMPUTE_DATA_DIR (or --data-dir) " +
				"to the control plane's data directory that holds root-token (" + filepath.Join(empty, "root-token") + " does not exist)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, url := newAPI(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			args := append(append([]string{"better-compute", "--url", url}, tt.args...), "sites", "list")
			code := Main(context.Background(), args, &out, &errb)
			if code != tt.code || errb.String() != tt.stderr {
				t.Fatalf("Main(%q) = %d, %q; want %d, %q", args, code, errb.String(), tt.code, tt.stderr)
			}
			calls := rec.all()
			if tt.auth == "" {
				if len(calls) != 0 {
					t.Errorf("Main(%q) made %d calls without a token, want 0", args, len(calls))
				}
				return
			}
			if len(calls) != 1 || calls[0].auth != tt.auth {
				t.Errorf("Main(%q) calls = %+v, want one with Authorization %q", args, calls, tt.auth)
			}
		})
	}
}

func TestTenantFromEnv(t *testing.T) {
	isolate(t)
	t.Setenv("BETTER_COMPUTE_TENANT", "root")
	rec, url := newAPI(t)
	if _, stderr, code := run(url, "sites", "get", "site_1"); code != 0 {
		t.Fatalf("sites get = %d, want 0; stderr %q", code, stderr)
	}
	got := rec.all()[0]
	if got.tenant != "root" || got.body["tenantId"] != "root" {
		t.Errorf("sites get with BETTER_COMPUTE_TENANT=root sent header %q body %v, want root in both", got.tenant, got.body)
	}
}
