package cli

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// metalFake answers the metal verbs with the node and a workflow named after
// the verb, and Get with the states of script in turn (the last one repeats);
// "!unavailable" in the script answers UNAVAILABLE instead.
type metalFake struct {
	bettercomputev1connect.UnimplementedMetalServiceHandler
	mu     sync.Mutex
	script []string
	gets   int
}

// newMetalAPI serves the metal and commands handlers over a real HTTP listener.
func newMetalAPI(t *testing.T, script ...string) (*recorder, *metalFake, string) {
	t.Helper()
	f := &metalFake{script: script}
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewMetalServiceHandler(f))
	mux.Handle(bettercomputev1connect.NewCommandsServiceHandler(commandsFake{}))
	srv := httptest.NewServer(rec.wrap(mux))
	t.Cleanup(srv.Close)
	return rec, f, srv.URL
}

func (f *metalFake) getCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

func (f *metalFake) next() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if len(f.script) == 0 {
		return "ready"
	}
	st := f.script[0]
	if len(f.script) > 1 {
		f.script = f.script[1:]
	}
	return st
}

// node is a node in state; "ready+refused" is a ready node a deploy left
// there with its error.
func node(id, state string) *v1.Node {
	state, refused := strings.CutSuffix(state, "+refused")
	n := &v1.Node{Id: id, PoolId: "pool_1", State: state, BmcDriver: "redfish", BmcAddress: "10.20.0.14"}
	if state == "failed" {
		n.FailedFrom, n.LastError, n.Maintenance = "deploying", "image digest mismatch", true
	}
	if refused {
		n.LastError = "deploy failed and left the node " + state + ": cache.ensureImage: DRIVER_ERROR: connection refused"
	}
	return n
}

func started(verb, id, state string) (*connect.Response[v1.VerbResponse], error) {
	return ok(&v1.VerbResponse{Node: node(id, state), WorkflowId: verb + "-" + id, RunId: "run-1"})
}

func (f *metalFake) Enroll(_ context.Context, r *connect.Request[v1.EnrollRequest]) (*connect.Response[v1.VerbResponse], error) {
	if r.Msg.GetPoolId() == "pool_bad" {
		return nil, apiError(connect.CodeInvalidArgument, "INVALID_INPUT", "poolId", "pool pool_bad is on another site")
	}
	return started("enroll", "node_1", "enrolling")
}

func (f *metalFake) Update(_ context.Context, r *connect.Request[v1.UpdateNodeRequest]) (*connect.Response[v1.GetNodeResponse], error) {
	return ok(&v1.GetNodeResponse{Node: node(r.Msg.GetId(), "failed")})
}

func (f *metalFake) Get(_ context.Context, r *connect.Request[v1.GetNodeRequest]) (*connect.Response[v1.GetNodeResponse], error) {
	if r.Msg.GetId() == "node_missing" {
		return nil, apiError(connect.CodeNotFound, "NOT_FOUND", "", "node node_missing not found")
	}
	st := f.next()
	if st == "!unavailable" {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("database restarting"))
	}
	return ok(&v1.GetNodeResponse{Node: node(r.Msg.GetId(), st)})
}

func (f *metalFake) List(context.Context, *connect.Request[v1.ListNodesRequest]) (*connect.Response[v1.ListNodesResponse], error) {
	return ok(&v1.ListNodesResponse{Items: []*v1.Node{node("node_1", "ready"), node("node_2", "failed")}})
}

func (f *metalFake) Deploy(_ context.Context, r *connect.Request[v1.DeployRequest]) (*connect.Response[v1.VerbResponse], error) {
	return started("deploy", r.Msg.GetNodeId(), "deploying")
}

func (f *metalFake) Undeploy(_ context.Context, r *connect.Request[v1.UndeployRequest]) (*connect.Response[v1.VerbResponse], error) {
	return started("undeploy", r.Msg.GetNodeId(), "releasing")
}

func (f *metalFake) Abort(_ context.Context, r *connect.Request[v1.AbortRequest]) (*connect.Response[v1.VerbResponse], error) {
	return started("abort", r.Msg.GetNodeId(), "failed")
}

func (f *metalFake) Power(_ context.Context, r *connect.Request[v1.PowerRequest]) (*connect.Response[v1.VerbResponse], error) {
	return started("power", r.Msg.GetNodeId(), "ready")
}

type nodeVerbReq = connect.Request[v1.NodeVerbRequest]
type verbResp = connect.Response[v1.VerbResponse]

func (f *metalFake) Manage(_ context.Context, r *nodeVerbReq) (*verbResp, error) {
	return started("manage", r.Msg.GetNodeId(), "manageable")
}

func (f *metalFake) Inspect(_ context.Context, r *nodeVerbReq) (*verbResp, error) {
	return started("inspect", r.Msg.GetNodeId(), "inspecting")
}

func (f *metalFake) Provide(_ context.Context, r *nodeVerbReq) (*verbResp, error) {
	return started("provide", r.Msg.GetNodeId(), "cleaning")
}

func (f *metalFake) Rescue(_ context.Context, r *nodeVerbReq) (*verbResp, error) {
	return started("rescue", r.Msg.GetNodeId(), "rescuing")
}

func (f *metalFake) Unrescue(_ context.Context, r *nodeVerbReq) (*verbResp, error) {
	return started("unrescue", r.Msg.GetNodeId(), "unrescuing")
}

func (f *metalFake) Recover(_ context.Context, r *nodeVerbReq) (*verbResp, error) {
	return started("recover", r.Msg.GetNodeId(), "cleaning")
}

func (f *metalFake) Retire(_ context.Context, r *nodeVerbReq) (*verbResp, error) {
	return started("retire", r.Msg.GetNodeId(), "retiring")
}

type commandsFake struct {
	bettercomputev1connect.UnimplementedCommandsServiceHandler
}

func (commandsFake) List(_ context.Context, r *connect.Request[v1.ListCommandsRequest]) (*connect.Response[v1.ListCommandsResponse], error) {
	n := r.Msg.GetNodeId()
	return ok(&v1.ListCommandsResponse{Items: []*v1.Command{
		{Id: "cmd_1", NodeId: n, Kind: "bmc.setPower", RunsOn: "site", Step: "power-on", Attempt: 1, Status: "succeeded", DurationMs: 812},
		{Id: "cmd_2", NodeId: n, Kind: "disk.wipe", RunsOn: "ramdisk", Step: "wipe", Attempt: 2, Status: "failed",
			ErrorKind: "DRIVER_ERROR", Error: "read-back\tmismatch", DurationMs: 61000},
	}})
}

func TestMetalRequests(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	pw := writeFile(t, dir, "bmc-password", "s3cret pa55\n")
	pwCRLF := writeFile(t, dir, "bmc-password-crlf", "s3cret pa55\r\n")
	enroll := []string{"metal", "enroll", "--site", "site_1", "--pool", "pool_1", "--bmc-address", "10.20.0.14", "--bmc-driver"}
	withRef := map[string]any{"address": "10.20.0.14", "driver": "redfish", "credentialsRef": "secret://root/bmc-r12-14"}
	withPassword := map[string]any{"address": "10.20.0.14", "driver": "ipmi", "credentials": map[string]any{"username": "admin", "password": "s3cret pa55"}}
	nodeBody := map[string]any{"tenantId": "root", "nodeId": "node_1"}
	const svc = "/bettercompute.v1.MetalService/"
	tests := []struct {
		args      []string
		procedure string
		body      map[string]any
	}{
		{append(enroll, "redfish", "--bmc-credentials", "secret://root/bmc-r12-14", "--macs", "b8:ce:f6:00:00:01, b8:ce:f6:00:00:02",
			"--product-uuid", "4c4c4544-0042", "--addresses", "10.20.1.14"), svc + "Enroll",
			map[string]any{"tenantId": "root", "siteId": "site_1", "poolId": "pool_1", "bmc": withRef,
				"macs": []any{"b8:ce:f6:00:00:01", "b8:ce:f6:00:00:02"}, "productUuid": "4c4c4544-0042", "addresses": []any{"10.20.1.14"}}},
		{append(enroll, "ipmi", "--bmc-username", "admin", "--bmc-password-file", pw), svc + "Enroll",
			map[string]any{"tenantId": "root", "siteId": "site_1", "poolId": "pool_1", "bmc": withPassword}},
		{append(enroll, "ipmi", "--bmc-username", "admin", "--bmc-password-file", pwCRLF), svc + "Enroll",
			map[string]any{"tenantId": "root", "siteId": "site_1", "poolId": "pool_1", "bmc": withPassword}},
		{[]string{"metal", "update", "node_1", "--bmc-username", "admin", "--bmc-password-file", pw}, svc + "Update",
			map[string]any{"tenantId": "root", "id": "node_1", "bmc": map[string]any{"credentials": map[string]any{"username": "admin", "password": "s3cret pa55"}}}},
		{[]string{"metal", "update", "node_1", "--bmc-address", "10.20.0.15", "--bmc-credentials", "secret://root/bmc-2"}, svc + "Update",
			map[string]any{"tenantId": "root", "id": "node_1", "bmc": map[string]any{"address": "10.20.0.15", "credentialsRef": "secret://root/bmc-2"}}},
		{[]string{"metal", "get", "node_1"}, svc + "Get", map[string]any{"tenantId": "root", "id": "node_1"}},
		{[]string{"metal", "list"}, svc + "List", map[string]any{"tenantId": "root"}},
		{[]string{"metal", "list", "--pool", "pool_1"}, svc + "List", map[string]any{"tenantId": "root", "poolId": "pool_1"}},
		{[]string{"metal", "deploy", "node_1", "--profile", "ubuntu-24.04-gpu-host", "--profile-version", "1"}, svc + "Deploy",
			map[string]any{"tenantId": "root", "nodeId": "node_1", "profile": "ubuntu-24.04-gpu-host", "profileVersion": float64(1)}},
		{[]string{"metal", "undeploy", "node_1"}, svc + "Undeploy", map[string]any{"tenantId": "root", "nodeId": "node_1", "wipe": "quick"}},
		{[]string{"metal", "undeploy", "node_1", "--wipe", "secure-erase"}, svc + "Undeploy",
			map[string]any{"tenantId": "root", "nodeId": "node_1", "wipe": "secure-erase"}},
		{[]string{"metal", "power", "node_1", "--action", "cycle"}, svc + "Power", map[string]any{"tenantId": "root", "nodeId": "node_1", "action": "cycle"}},
		{[]string{"metal", "power", "--action", "graceful-off", "node_1"}, svc + "Power",
			map[string]any{"tenantId": "root", "nodeId": "node_1", "action": "graceful-off"}},
		{[]string{"metal", "abort", "node_1", "--reason", "wrong profile"}, svc + "Abort",
			map[string]any{"tenantId": "root", "nodeId": "node_1", "reason": "wrong profile"}},
		{[]string{"metal", "manage", "node_1", "-o", "json"}, svc + "Manage", nodeBody},
		{[]string{"metal", "inspect", "node_1"}, svc + "Inspect", nodeBody},
		{[]string{"metal", "provide", "node_1"}, svc + "Provide", nodeBody},
		{[]string{"metal", "rescue", "node_1"}, svc + "Rescue", nodeBody},
		{[]string{"metal", "unrescue", "node_1"}, svc + "Unrescue", nodeBody},
		{[]string{"metal", "recover", "node_1", "--query", "workflowId"}, svc + "Recover", nodeBody},
		{[]string{"metal", "retire", "node_1"}, svc + "Retire", nodeBody},
		{[]string{"commands", "list", "--node", "node_1"}, "/bettercompute.v1.CommandsService/List", map[string]any{"tenantId": "root", "nodeId": "node_1"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			rec, _, url := newMetalAPI(t)
			args := append([]string{"--tenant", "root"}, tt.args...)
			_, stderr, code := run(url, args...)
			if code != 0 {
				t.Fatalf("Main(%q) = %d, want 0; stderr %q", args, code, stderr)
			}
			calls := rec.all()
			if len(calls) != 1 {
				t.Fatalf("Main(%q) made %d calls, want 1", args, len(calls))
			}
			if calls[0].procedure != tt.procedure {
				t.Errorf("Main(%q) called %s, want %s", args, calls[0].procedure, tt.procedure)
			}
			if diff := cmp.Diff(tt.body, calls[0].body); diff != "" {
				t.Errorf("Main(%q) request body (-want +got):\n%s", args, diff)
			}
		})
	}
}

// TestMetalPasswordNeverPrinted reads the password from its file, sends it,
// and shows it in no output format.
func TestMetalPasswordNeverPrinted(t *testing.T) {
	isolate(t)
	const secret = "hunter2-very-secret"
	pw := writeFile(t, t.TempDir(), "bmc-password", secret+"\n")
	for _, extra := range [][]string{{"-o", "table"}, {"-o", "json"}, {"--query", "@"}, {"--pool", "pool_bad"}} {
		t.Run(strings.Join(extra, " "), func(t *testing.T) {
			rec, _, url := newMetalAPI(t)
			args := append([]string{"metal", "enroll", "--site", "site_1", "--pool", "pool_1", "--bmc-address", "10.20.0.14",
				"--bmc-driver", "redfish", "--bmc-username", "admin", "--bmc-password-file", pw}, extra...)
			stdout, stderr, _ := run(url, args...)
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("Main(%q) printed the password: stdout %q stderr %q", args, stdout, stderr)
			}
			calls := rec.all()
			if len(calls) != 1 || lookup(calls[0].body, "bmc.credentials.password") != secret {
				t.Errorf("Main(%q) calls = %+v, want one carrying the password from the file", args, calls)
			}
		})
	}
}

func TestNoPasswordFlag(t *testing.T) {
	for _, f := range enrollCommand().Flags {
		for _, n := range f.Names() {
			if n == "bmc-password" || n == "password" {
				t.Errorf("enrollCommand() has flag --%s, want no password flag", n)
			}
		}
	}
}

func TestMetalErrors(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	pw := writeFile(t, dir, "bmc-password", "pa55\n")
	empty := writeFile(t, dir, "empty", "\n")
	missing := filepath.Join(dir, "missing")
	enroll := []string{"metal", "enroll", "--site", "site_1", "--pool", "pool_1", "--bmc-address", "10.20.0.14", "--bmc-driver", "redfish"}
	both := "error: INVALID_INPUT: give either --bmc-credentials (a secret://, env:// or vault:// reference) or --bmc-username with --bmc-password-file"
	tests := []struct {
		args   []string
		stderr string // a prefix of what is printed
		code   int
		calls  int
	}{
		{append(enroll, "--bmc-username", "admin", "--bmc-password", "pa55"), "error: INVALID_INPUT: flag provided but not defined: -bmc-password", 2, 0},
		{append(enroll, "--bmc-credentials", "secret://x", "--bmc-username", "admin", "--bmc-password-file", pw), both + ", not both (field bmc-credentials)\n", 2, 0},
		{enroll, both + " (field bmc-credentials)\n", 2, 0},
		{append(enroll, "--bmc-credentials", "hunter2"), "error: INVALID_INPUT: --bmc-credentials must be a secret://, env:// or vault:// reference (the value is not shown)", 2, 0},
		{append(enroll, "--bmc-credentials", "secret://"), "error: INVALID_INPUT: --bmc-credentials must be", 2, 0},
		{append(enroll, "--bmc-username", "admin"), "error: INVALID_INPUT: --bmc-username needs --bmc-password-file", 2, 0},
		{append(enroll, "--bmc-username", "admin", "--bmc-password-file", missing),
			"error: INVALID_INPUT: file " + missing + " does not exist (field bmc-password-file)\n", 2, 0},
		{append(enroll, "--bmc-username", "admin", "--bmc-password-file", empty),
			"error: INVALID_INPUT: " + empty + " is empty; write the BMC password into it (field bmc-password-file)\n", 2, 0},
		{[]string{"metal", "enroll", "--site", "s", "--pool", "p", "--bmc-address", "a", "--bmc-driver", "ilo", "--bmc-credentials", "env://BMC"},
			"error: INVALID_INPUT: --bmc-driver must be redfish or ipmi, not \"ilo\" (field bmc-driver)\n", 2, 0},
		{[]string{"metal", "enroll", "--site", "s"}, "error: INVALID_INPUT: --pool is required", 2, 0},
		{[]string{"metal", "enroll", "--site", "s", "--pool", "pool_bad", "--bmc-address", "a", "--bmc-driver", "ipmi", "--bmc-credentials", "vault://bmc/a"},
			"error: INVALID_INPUT: pool pool_bad is on another site (field poolId)\n", 2, 1},
		{[]string{"metal", "deploy", "node_1", "--profile", "p"}, "error: INVALID_INPUT: --profile-version is required and must be positive", 2, 0},
		{[]string{"metal", "deploy", "--profile", "p", "--profile-version", "1"}, "error: INVALID_INPUT: missing NODE; usage: better-compute metal deploy NODE", 2, 0},
		{[]string{"metal", "abort", "node_1"}, "error: INVALID_INPUT: --reason is required", 2, 0},
		{[]string{"metal", "power", "node_1"}, "error: INVALID_INPUT: --action is required", 2, 0},
		{[]string{"metal", "retire", "node_1", "node_2"}, "error: INVALID_INPUT: unexpected argument \"node_2\"", 2, 0},
		{[]string{"metal", "get", "node_missing"}, "error: NOT_FOUND: node node_missing not found\n", 1, 1},
		{[]string{"metal", "wait", "node_1", "--state", "done"}, "error: INVALID_INPUT: unknown node state \"done\"; the states are [enrolling", 2, 0},
		{[]string{"metal", "wait", "node_1"}, "error: INVALID_INPUT: --state is required", 2, 0},
		{[]string{"metal", "wait", "node_1", "--state", "ready", "--timeout", "0s"}, "error: INVALID_INPUT: --timeout must be positive", 2, 0},
		{[]string{"metal", "wait", "node_missing", "--state", "ready"}, "error: NOT_FOUND: node node_missing not found\n", 1, 1},
		{[]string{"commands", "list"}, "error: INVALID_INPUT: --node is required", 2, 0},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			rec, _, url := newMetalAPI(t)
			_, stderr, code := run(url, tt.args...)
			if code != tt.code || !strings.HasPrefix(stderr, tt.stderr) {
				t.Errorf("Main(%q) = %d, %q; want %d, prefix %q", tt.args, code, stderr, tt.code, tt.stderr)
			}
			if n := len(rec.all()); n != tt.calls {
				t.Errorf("Main(%q) made %d calls, want %d", tt.args, n, tt.calls)
			}
			if strings.Contains(stderr, "hunter2") || strings.Contains(stderr, "pa55") {
				t.Errorf("Main(%q) stderr = %q, repeats a password", tt.args, stderr)
			}
		})
	}
}

func TestMetalOutput(t *testing.T) {
	isolate(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"metal", "deploy", "node_1", "--profile", "p", "--profile-version", "1"},
			"ID      STATE      WORKFLOW_ID\nnode_1  deploying  deploy-node_1\n"},
		{[]string{"metal", "retire", "node_7"}, "ID      STATE     WORKFLOW_ID\nnode_7  retiring  retire-node_7\n"},
		{[]string{"metal", "inspect", "node_1", "--query", "workflowId"}, "inspect-node_1\n"},
		{[]string{"metal", "abort", "node_1", "--reason", "r", "-o", "json", "--query", "[node.failedFrom, runId]"},
			"[\n  \"deploying\",\n  \"run-1\"\n]\n"},
		{[]string{"metal", "list"},
			"ID      POOL_ID  STATE   FAILED_FROM  MAINTENANCE  BMC_DRIVER  BMC_ADDRESS  PROFILE_ID  PROFILE_VERSION  PROGRESS\n" +
				"node_1  pool_1   ready                false        redfish     10.20.0.14               0                \n" +
				"node_2  pool_1   failed  deploying    true         redfish     10.20.0.14               0                \n"},
		{[]string{"commands", "list", "--node", "node_1"},
			"KIND          RUNS_ON  STEP      STATUS     ATTEMPT  DURATION_MS  ERROR_KIND    PROGRESS\n" +
				"bmc.setPower  site     power-on  succeeded  1        812                        \n" +
				"disk.wipe     ramdisk  wipe      failed     2        61000        DRIVER_ERROR  \n"},
		{[]string{"commands", "list", "--node", "node_1", "--query", "items[?status=='failed'].error"}, "read-back mismatch\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, url := newMetalAPI(t)
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

func TestMetalWait(t *testing.T) {
	isolate(t)
	tests := []struct {
		name    string
		script  []string
		args    []string
		code    int
		stdout  string // the node's state, from --query
		stderr  string
		gets    int
		atLeast time.Duration
		atMost  time.Duration
	}{
		{name: "reached", script: []string{"inspecting", "ready"}, args: []string{"--state", "ready"},
			stdout: "ready\n", stderr: "node node_1 is inspecting; waiting for ready\n", gets: 2, atLeast: time.Second, atMost: 3 * time.Second},
		{name: "at once", script: []string{"deployed"}, args: []string{"--state", "deployed"}, stdout: "deployed\n", gets: 1, atMost: time.Second},
		{name: "failed", script: []string{"failed"}, args: []string{"--state", "deployed"}, code: 1, stdout: "failed\n",
			stderr: "error: node node_1 failed from deploying: image digest mismatch " +
				"(see `commands list --node node_1`; `metal recover node_1` brings it back)\n",
			gets: 1, atMost: time.Second},
		// A deploy that failed before it moved the node: it stays ready.
		{name: "refused", script: []string{"ready", "ready+refused"}, args: []string{"--state", "deployed", "--timeout", "5s"}, code: 1, stdout: "ready\n",
			stderr: "node node_1 is ready; waiting for deployed\n" +
				"error: node node_1: deploy failed and left the node ready: cache.ensureImage: DRIVER_ERROR: connection refused " +
				"(see `commands list --node node_1`)\n",
			gets: 2, atLeast: time.Second, atMost: 3 * time.Second},
		// A retired node's error says what the retire skipped: no refusal.
		{name: "retired", script: []string{"retired+refused"}, args: []string{"--state", "ready", "--timeout", "300ms"}, code: 1, stdout: "retired\n",
			stderr: "node node_1 is retired; waiting for ready\nerror: node node_1 is still retired after 300ms, not ready\n",
			gets:   2, atLeast: 300 * time.Millisecond, atMost: 900 * time.Millisecond},
		{name: "waiting for the refused node's state", script: []string{"ready+refused"}, args: []string{"--state", "ready"}, stdout: "ready\n",
			gets: 1, atMost: time.Second},
		{name: "waiting for failed", script: []string{"failed"}, args: []string{"--state", "failed"}, stdout: "failed\n", gets: 1, atMost: time.Second},
		{name: "timeout", script: []string{"deploying"}, args: []string{"--state", "deployed", "--timeout", "300ms"}, code: 1, stdout: "deploying\n",
			stderr: "node node_1 is deploying; waiting for deployed\nerror: node node_1 is still deploying after 300ms, not deployed\n",
			gets:   2, atLeast: 300 * time.Millisecond, atMost: 900 * time.Millisecond},
		{name: "unavailable", script: []string{"!unavailable", "ready"}, args: []string{"--state", "ready"}, stdout: "ready\n",
			stderr: "note: cannot read node node_1 (UNAVAILABLE: database restarting); trying again\n",
			gets:   2, atLeast: time.Second, atMost: 3 * time.Second},
		{name: "never read", script: []string{"!unavailable"}, args: []string{"--state", "ready", "--timeout", "200ms"}, code: 1,
			stderr: "note: cannot read node node_1 (UNAVAILABLE: database restarting); trying again\n" +
				"note: cannot read node node_1 (UNAVAILABLE: database restarting); trying again\n" +
				"error: node node_1 could not be read for 200ms\n",
			gets: 2, atLeast: 200 * time.Millisecond, atMost: 900 * time.Millisecond},
	}
	// Not parallel: urfave/cli writes package-level flags while it runs.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, f, url := newMetalAPI(t, tt.script...)
			args := append([]string{"metal", "wait", "node_1", "--query", "node.state"}, tt.args...)
			start := time.Now()
			stdout, stderr, code := run(url, args...)
			took := time.Since(start)
			if code != tt.code || stdout != tt.stdout || stderr != tt.stderr {
				t.Errorf("Main(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", args, code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
			if got := f.getCount(); got != tt.gets {
				t.Errorf("Main(%q) read the node %d times, want %d", args, got, tt.gets)
			}
			if took < tt.atLeast || took > tt.atMost {
				t.Errorf("Main(%q) took %s, want between %s and %s", args, took, tt.atLeast, tt.atMost)
			}
		})
	}
}
