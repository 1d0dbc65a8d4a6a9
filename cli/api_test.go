package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"

	"github.com/better-compute/better-compute/errs"
)

func TestMethods(t *testing.T) {
	table := Methods()
	tests := map[string]string{
		"images.register":       "/bettercompute.v1.ImagesService/Register",
		"siteTokens.create":     "/bettercompute.v1.SiteTokensService/Create",
		"hardwareProfiles.list": "/bettercompute.v1.HardwareProfilesService/List",
		"profiles.validate":     "/bettercompute.v1.ProfilesService/Validate",
		"workflows.get":         "/bettercompute.v1.WorkflowsService/Get",
	}
	for name, want := range tests {
		if got := table[name].Procedure; got != want {
			t.Errorf("Methods()[%q].Procedure = %q, want %q", name, got, want)
		}
	}
}

func TestLowerCamel(t *testing.T) {
	for in, want := range map[string]string{
		"Sites": "sites", "SiteTokens": "siteTokens", "HardwareProfiles": "hardwareProfiles",
		"HTTPProxy": "httpProxy", "BMC": "bmc", "ConfirmMac": "confirmMac", "x": "x",
	} {
		if got := lowerCamel(in); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAPIFromStdin(t *testing.T) {
	isolate(t)
	rec, url := newAPI(t)
	var out, errb bytes.Buffer
	app := App(&out, &errb)
	app.Reader = strings.NewReader(`{"id":"site_1"}`)
	args := []string{"better-compute", "--url", url, "--token", "tok", "--tenant", "root", "api", "sites.get", "--data", "@-", "-o", "json", "--query", "site.region"}
	if err := app.RunContext(context.Background(), args); err != nil {
		t.Fatalf("App().Run(%q) = %v", args, err)
	}
	if got, want := out.String(), "\"lab-1\"\n"; got != want {
		t.Errorf("App().Run(%q) stdout = %q, want %q", args, got, want)
	}
	want := map[string]any{"id": "site_1", "tenantId": "root"}
	if diff := cmp.Diff(want, rec.all()[0].body); diff != "" {
		t.Errorf("App().Run(%q) request (-want +got):\n%s", args, diff)
	}
}

func TestSiteTokenOut(t *testing.T) {
	isolate(t)
	const secret = "bcst_join_secret"
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			_, url := newAPI(t)
			path := filepath.Join(t.TempDir(), "site-token")
			// An older file with a looser mode is replaced, not reused.
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := run(url, "site-tokens", "create", "--site", "site_1", "--ttl", "3600", "--key", "lab-1-agents", "--out", path, "-o", format)
			if code != 0 {
				t.Fatalf("site-tokens create --out = %d, want 0; stderr %q", code, stderr)
			}
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("site-tokens create --out printed the secret: stdout %q stderr %q", stdout, stderr)
			}
			if !strings.Contains(stdout, "stk_1") {
				t.Errorf("site-tokens create --out stdout = %q, want the token record stk_1", stdout)
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != secret {
				t.Errorf("ReadFile(%s) = %q, %v; want %q", path, b, err, secret)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("Stat(%s) mode = %v, %v; want 0600", path, fi.Mode().Perm(), err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".site-token.tmp-*")); len(left) != 0 {
				t.Errorf("site-tokens create left temporary files %v", left)
			}
		})
	}
}

func TestSiteTokenPrintedOnce(t *testing.T) {
	isolate(t)
	_, url := newAPI(t)
	stdout, stderr, code := run(url, "site-tokens", "create", "--site", "site_1", "--ttl", "60", "--query", "token")
	if code != 0 || stdout != "bcst_join_secret\n" || strings.Contains(stderr, "bcst_join_secret") {
		t.Errorf("site-tokens create = %d, stdout %q, stderr %q; want 0 and the token once on stdout", code, stdout, stderr)
	}
}

func TestParseTTL(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"3600", 3600, true}, {"1h", 3600, true}, {"90s", 90, true}, {"720h", 2592000, true},
		{"0", 0, false}, {"-5", 0, false}, {"1.5s", 0, false}, {"soon", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		got, err := parseTTL(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("parseTTL(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestKeyRanks(t *testing.T) {
	got := keyRanks([]byte(`{"items":[{"id":"a","tags":["x",{"k":1}],"nested":{"z":1,"id":2},"b":true}],"next":"n"}`))
	want := map[string]int{"items": 0, "id": 1, "tags": 2, "k": 3, "nested": 4, "z": 5, "b": 6, "next": 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keyRanks() (-want +got):\n%s", diff)
	}
}

func TestExtraCommands(t *testing.T) {
	isolate(t)
	var got int
	serve := &cli.Command{Name: "serve", Flags: []cli.Flag{&cli.IntFlag{Name: "port"}},
		Action: func(c *cli.Context) error { got = c.Int("port"); return nil }}
	pki := &cli.Command{Name: "pki", Subcommands: []*cli.Command{{Name: "init", Action: func(*cli.Context) error {
		return errs.New(errs.InvalidState, "already initialised")
	}}}}
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"serve", "--port", "7780"}, 0, ""},
		{[]string{"serve", "--port", "many"}, 2, "error: INVALID_INPUT: invalid value \"many\" for flag -port"},
		{[]string{"pki", "init"}, 1, "error: INVALID_STATE: already initialised\n"},
		{[]string{"pki", "frobnicate"}, 2, "error: INVALID_INPUT: unknown command \"frobnicate\""},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"better-compute"}, tt.args...)
		code := Main(context.Background(), args, &out, &errb, serve, pki)
		if code != tt.code || !strings.HasPrefix(errb.String(), tt.stderr) {
			t.Errorf("Main(%q) = %d, %q; want %d, prefix %q", args, code, errb.String(), tt.code, tt.stderr)
		}
	}
	if got != 7780 {
		t.Errorf("serve --port 7780 saw port %d, want 7780", got)
	}
}
