package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/startid"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/tserver"
)

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func start(t *testing.T, cfg controlplane.Config) *controlplane.ControlPlane {
	t.Helper()
	if cfg.TemporalListen == "" {
		cfg.TemporalListen = "127.0.0.1:0"
	}
	cfg.Listen, cfg.UIListen, cfg.AgentsListen, cfg.Logger = "127.0.0.1:0", "off", "off", quiet()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", cfg, err)
	}
	return cp
}

// call posts a Connect JSON request with the process's root token.
func call(t *testing.T, cp *controlplane.ControlPlane, procedure, body string) map[string]any {
	t.Helper()
	tok, err := os.ReadFile(cp.RootTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, cp.APIURL()+"/bettercompute.v1."+procedure, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != 200 {
		t.Fatalf("%s(%s) = %d %v", procedure, body, resp.StatusCode, out)
	}
	return out
}

// startTestWorkflow starts a workflow nobody serves, tagged like a node's.
func startTestWorkflow(t *testing.T, c client.Client, node string) {
	t.Helper()
	_, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: "test/" + node, TaskQueue: "nobody",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword("TenantId").ValueSet("root"),
			temporal.NewSearchAttributeKeyKeyword("NodeId").ValueSet(node),
			temporal.NewSearchAttributeKeyKeyword("ProfileId").ValueSet("metal-enroll"),
		)}, "test.wait")
	if err != nil {
		t.Fatal(err)
	}
}

// waitWorkflows polls workflows.list (visibility is eventually consistent).
func waitWorkflows(t *testing.T, cp *controlplane.ControlPlane, node string, want int) []any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := call(t, cp, "WorkflowsService/List", fmt.Sprintf(`{"nodeId":%q}`, node))
		items, _ := out["items"].([]any)
		if len(items) == want {
			return items
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflows.list(node %s) = %v, want %d items", node, out, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const node = "node_01kbxxxxxxxxxxxxxxxxxxxxxx"

// TestRestartKeepsEverything: a second start on the same data dir keeps
// every row, every workflow and the root credential.
func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	cp := start(t, controlplane.Config{DataDir: dir})
	site := call(t, cp, "SitesService/Create", `{"kind":"shared","region":"lab-1","key":"lab-1"}`)
	startTestWorkflow(t, cp.Client(), node)
	waitWorkflows(t, cp, node, 1)
	token, _ := os.ReadFile(cp.RootTokenPath())
	if fi, err := os.Stat(cp.RootTokenPath()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("root token %s mode = %v, %v; want 0600", cp.RootTokenPath(), fi.Mode(), err)
	}
	var banner strings.Builder
	cp.PrintBanner(&banner, time.Second)
	if !strings.Contains(banner.String(), "plain, no CA") {
		t.Errorf("PrintBanner without a CA = %s, want the Temporal line to say it is plain", banner.String())
	}
	cp.Stop()
	cp.Stop() // safe twice

	// Between the starts the operator makes a CA: from now on the embedded
	// frontend speaks mTLS only, and what ran before is still there.
	if _, err := pki.Init(filepath.Join(dir, "pki"), "cp.test"); err != nil {
		t.Fatal(err)
	}
	cp = start(t, controlplane.Config{DataDir: dir})
	defer cp.Stop()
	checkFrontendMTLS(t, cp)
	again, _ := os.ReadFile(cp.RootTokenPath())
	if string(again) != string(token) {
		t.Errorf("root token changed across restart")
	}
	sites := call(t, cp, "SitesService/List", `{}`)
	items, _ := sites["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != site["site"].(map[string]any)["id"] {
		t.Errorf("sites after restart = %v, want %v", sites, site)
	}
	got := waitWorkflows(t, cp, node, 1)[0].(map[string]any)
	if got["profileId"] != "metal-enroll" || got["status"] != "running" {
		t.Errorf("workflow after restart = %v, want running with profileId metal-enroll", got)
	}
	if h, err := http.Get(cp.APIURL() + "/healthz"); err != nil || h.StatusCode != 200 {
		t.Errorf("healthz = %v, %v", h, err)
	}
}

// checkFrontendMTLS checks that the embedded frontend refuses a plain
// client and that the banner says it speaks mTLS.
func checkFrontendMTLS(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: cp.TemporalAddress(), Namespace: controlplane.DefaultNamespace,
		Logger: log.NewStructuredLogger(quiet())})
	if err == nil {
		_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: controlplane.DefaultNamespace})
		c.Close()
	}
	if err == nil {
		t.Errorf("a plain client reached the embedded frontend %s with a CA in place", cp.TemporalAddress())
	}
	var banner strings.Builder
	cp.PrintBanner(&banner, time.Second)
	if !strings.Contains(banner.String(), "mTLS") {
		t.Errorf("PrintBanner = %s, want the Temporal line to say mTLS", banner.String())
	}
}

// TestExternalTemporalAndScaleOut: two processes share one external
// Temporal and one PostgreSQL; one serves only the API, the other only the
// worker... and a third both: what one writes the others read.
func TestExternalTemporalAndScaleOut(t *testing.T) {
	ctx := context.Background()
	ext, err := tserver.Start(ctx, tserver.Config{DataDir: t.TempDir(), Namespace: "default", UIPort: -1, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Stop()
	const ns = "better-compute-ext"
	aDir := t.TempDir()
	a := start(t, controlplane.Config{DataDir: aDir, TemporalAddress: ext.FrontendAddress(), TemporalNamespace: ns})
	defer a.Stop()
	// Every process over the database needs the first one's key file.
	keyFile := filepath.Join(aDir, controlplane.KeyFile)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := controlplane.Start(ctx, withQuiet(controlplane.Config{DataDir: t.TempDir(), DatabaseURL: a.DatabaseURL(),
		TemporalAddress: ext.FrontendAddress(), TemporalNamespace: ns, Only: controlplane.OnlyWorker})); !errs.Is(err, errs.InvalidState) {
		t.Errorf("Start(another key file) = %v, want INVALID_STATE", err)
	}
	b := start(t, controlplane.Config{DataDir: t.TempDir(), DatabaseURL: a.DatabaseURL(), KeyFile: keyFile,
		TemporalAddress: ext.FrontendAddress(), TemporalNamespace: ns, Only: controlplane.OnlyAPI})
	defer b.Stop()
	w := start(t, controlplane.Config{DataDir: t.TempDir(), DatabaseURL: a.DatabaseURL(), KeyFile: keyFile,
		TemporalAddress: ext.FrontendAddress(), TemporalNamespace: ns, Only: controlplane.OnlyWorker})
	defer w.Stop()
	if w.APIURL() != "" {
		t.Errorf("--only worker serves an API at %s", w.APIURL())
	}

	site := call(t, a, "SitesService/Create", `{"kind":"shared","region":"lab-1","key":"k"}`)
	again := call(t, b, "SitesService/Create", `{"kind":"shared","region":"lab-1","key":"k"}`)
	if site["site"].(map[string]any)["id"] != again["site"].(map[string]any)["id"] {
		t.Errorf("the second process created another site for the same key: %v vs %v", site, again)
	}
	startTestWorkflow(t, a.Client(), node)
	waitWorkflows(t, b, node, 1)
}

// TestScaleOutOverMTLS: a second process shares the first's Postgres and
// its embedded Temporal, whose frontend speaks mTLS only, by presenting a
// control-plane certificate of the same CA (the pki dir shared).
func TestScaleOutOverMTLS(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(filepath.Join(dir, "pki"), "scale.test"); err != nil {
		t.Fatal(err)
	}
	a := start(t, controlplane.Config{DataDir: dir})
	defer a.Stop()
	cfg := controlplane.Config{DataDir: t.TempDir(), DatabaseURL: a.DatabaseURL(), TemporalAddress: a.TemporalAddress(),
		PKIDir: filepath.Join(dir, "pki"), KeyFile: filepath.Join(dir, controlplane.KeyFile), Only: controlplane.OnlyAPI}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := controlplane.Start(ctx, withQuiet(cfg)); err == nil {
		t.Fatalf("Start without --temporal-tls against an mTLS frontend = nil error, want refused")
	}
	cfg.TemporalTLS = true
	b := start(t, cfg)
	defer b.Stop()
	startTestWorkflow(t, a.Client(), node)
	waitWorkflows(t, b, node, 1)
	call(t, b, "SitesService/Create", `{"kind":"shared","region":"lab-1","key":"k"}`)
	if l := call(t, a, "SitesService/List", `{}`); len(l["items"].([]any)) != 1 {
		t.Errorf("the first process does not see the second's site: %v", l)
	}
}

func withQuiet(cfg controlplane.Config) controlplane.Config {
	cfg.TemporalListen, cfg.Listen, cfg.UIListen, cfg.AgentsListen, cfg.Logger = "127.0.0.1:0", "127.0.0.1:0", "off", "off", quiet()
	return cfg
}

// TestStartsUnderOneIDAreOneRun: the control plane's Temporal client gives
// a workflow start made under startid.With its request id, so a start asked
// again after an answer lost in time (api/metal.go) is answered with the run
// the first started; a start under another id is refused as a second run.
func TestStartsUnderOneIDAreOneRun(t *testing.T) {
	cp := start(t, controlplane.Config{DataDir: t.TempDir()})
	t.Cleanup(cp.Stop)
	c := cp.Client()
	opts := client.StartWorkflowOptions{ID: "test/one-id", TaskQueue: "nobody",
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, WorkflowExecutionErrorWhenAlreadyStarted: true}
	ctx := startid.With(context.Background(), "start-1")
	first, err := c.ExecuteWorkflow(ctx, opts, "test.wait")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.ExecuteWorkflow(ctx, opts, "test.wait")
	if err != nil || again.GetRunID() != first.GetRunID() {
		t.Fatalf("the start asked again under its id = %v, %v; want run %s", again, err, first.GetRunID())
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	for _, other := range []context.Context{context.Background(), startid.With(context.Background(), "start-2")} {
		if _, err := c.ExecuteWorkflow(other, opts, "test.wait"); !errors.As(err, &started) {
			t.Errorf("a start under id %q while run %s runs = %v, want WorkflowExecutionAlreadyStarted", startid.Of(other), first.GetRunID(), err)
		}
	}
}

// TestPortInUseFailsBeforeAnythingStarts: each port serve listens on, taken
// by another listener, fails Start at once with UNAVAILABLE naming its flag
// and nothing started: no PostgreSQL cluster made in the data dir. Before,
// serve started PostgreSQL (and, for the API's and the agents' ports,
// Temporal and the worker too) and found the port only when it came to it.
func TestPortInUseFailsBeforeAnythingStarts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	free := "127.0.0.1:0"
	for _, tc := range []struct {
		flag string
		cfg  controlplane.Config
	}{
		{"--listen", controlplane.Config{Listen: addr, TemporalListen: free, MetricsListen: free}},
		{"--metrics-listen", controlplane.Config{Listen: free, TemporalListen: free, MetricsListen: addr}},
		{"--agents-listen", controlplane.Config{Listen: free, TemporalListen: free, AgentsListen: addr}},
		{"--temporal-listen", controlplane.Config{Listen: free, TemporalListen: addr}},
		{"--ui-listen", controlplane.Config{Listen: free, TemporalListen: free, UIListen: addr}},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := pki.Init(filepath.Join(dir, "pki"), "test.example"); err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg
			cfg.DataDir, cfg.Logger = dir, quiet()
			if cfg.UIListen == "" {
				cfg.UIListen = "off"
			}
			if cfg.AgentsListen == "" {
				cfg.AgentsListen = free
			}
			cp, err := controlplane.Start(context.Background(), cfg)
			if err == nil {
				cp.Stop()
				t.Fatalf("Start with %s on %s (taken) = nil error", tc.flag, addr)
			}
			if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), tc.flag) || !strings.Contains(err.Error(), "already in use") {
				t.Errorf("Start with %s on %s (taken) = %v, want UNAVAILABLE naming %s", tc.flag, addr, err, tc.flag)
			}
			if _, err := os.Stat(filepath.Join(dir, "postgres")); !os.IsNotExist(err) {
				t.Errorf("Start with %s taken made %s/postgres (%v): something started before the port was checked", tc.flag, dir, err)
			}
		})
	}
}

// TestBadTLSPairFailsBeforeAnythingStarts: --tls-cert without --tls-key,
// or a pair that does not load, fails Start with INVALID_INPUT and nothing
// started. Before, serve found it only as the API came up, after
// PostgreSQL, Temporal and the worker.
func TestBadTLSPairFailsBeforeAnythingStarts(t *testing.T) {
	certFile, _, _ := selfSigned(t, t.TempDir())
	for name, cfg := range map[string]controlplane.Config{
		"no key":                {TLSCert: certFile},
		"a key that is not one": {TLSCert: certFile, TLSKey: certFile},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg.DataDir, cfg.Logger = dir, quiet()
			cfg.Listen, cfg.TemporalListen, cfg.UIListen, cfg.AgentsListen = "127.0.0.1:0", "127.0.0.1:0", "off", "off"
			cp, err := controlplane.Start(context.Background(), cfg)
			if err == nil {
				cp.Stop()
				t.Fatal("Start with a bad TLS pair = nil error")
			}
			if !errs.Is(err, errs.InvalidInput) || !strings.Contains(err.Error(), "tls-cert") {
				t.Errorf("Start with a bad TLS pair = %v, want INVALID_INPUT naming tls-cert", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "postgres")); !os.IsNotExist(err) {
				t.Errorf("Start with a bad TLS pair made %s/postgres (%v): something started first", dir, err)
			}
		})
	}
}
