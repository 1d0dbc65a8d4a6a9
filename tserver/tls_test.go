package tserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	tokenspb "go.temporal.io/server/api/token/v1"
	"go.temporal.io/server/common/tasktoken"

	"github.com/better-compute/better-compute/pki"
)

// lockedBuffer collects log lines from the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testPKI makes a CA in dir and the frontend's control-plane certificate
// for 127.0.0.1 and localhost, as files.
func testPKI(t *testing.T, dir string) (*pki.CA, TLS) {
	t.Helper()
	ca, err := pki.Init(filepath.Join(dir, "pki"), "t.test")
	if err != nil {
		t.Fatalf("pki.Init = %v", err)
	}
	files := TLS{CertFile: filepath.Join(dir, "frontend.crt"), KeyFile: filepath.Join(dir, "frontend.key"),
		CAFile: filepath.Join(dir, "pki", pki.CACertFile)}
	certPEM, keyPEM := issue(t, ca, pki.RoleControlPlane, "control-plane", "127.0.0.1", "localhost")
	if err := os.WriteFile(files.CertFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, files
}

func issue(t *testing.T, ca *pki.CA, role pki.Role, id string, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, keyPEM, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) > 0 {
		certPEM, err = ca.IssueServer(key.Public(), role, id, hosts, time.Hour)
	} else {
		certPEM, err = ca.Issue(key.Public(), role, id, time.Hour)
	}
	if err != nil {
		t.Fatalf("Issue(%s/%s) = %v", role, id, err)
	}
	return certPEM, keyPEM
}

// dialAs dials the frontend with tc (nil: plain) and, with lazy, without
// the eager GetSystemInfo of client.Dial.
func dialAs(t *testing.T, s *Server, ns string, tc *tls.Config, lazy bool) (client.Client, error) {
	t.Helper()
	opts := client.Options{HostPort: s.FrontendAddress(), Namespace: ns,
		Logger: quietSDK(), ConnectionOptions: client.ConnectionOptions{TLS: tc}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var c client.Client
	var err error
	if lazy {
		c, err = client.NewLazyClient(opts)
	} else {
		c, err = client.DialContext(ctx, opts)
	}
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

func quietSDK() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

func agentTLS(t *testing.T, ca *pki.CA, role pki.Role, id string) *tls.Config {
	t.Helper()
	certPEM, keyPEM := issue(t, ca, role, id)
	tc, err := pki.ClientTLS(ca.Pool(), certPEM, keyPEM, "127.0.0.1", ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleControlPlane}})
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// TestFrontendMTLS runs the embedded server with mTLS and checks who may do
// what: no certificate gets nothing; a site's certificate serves its own
// task queue with a real SDK worker but may not poll another site's queue,
// start a workflow or complete an activity by ID; a node's certificate is
// refused at the handshake; the control plane's certificate and the Web UI get everything.
func TestFrontendMTLS(t *testing.T) {
	const ns = "bc-test"
	dir := t.TempDir()
	ca, files := testPKI(t, dir)
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// No gate: the UI's mTLS to the frontend is under test here, the gate in package webui.
	open := func(h http.Handler) http.Handler { return h }
	s := startServer(t, ctx, Config{Namespace: ns, TLS: &files, Logger: log, UIGate: open})
	defer func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	}()

	t.Run("no certificate", func(t *testing.T) {
		noCert, err := pki.ClientTLS(ca.Pool(), nil, nil, "127.0.0.1", ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleControlPlane}})
		if err != nil {
			t.Fatal(err)
		}
		for name, tc := range map[string]*tls.Config{"plain": nil, "TLS without a client certificate": noCert} {
			if c, err := dialAs(t, s, ns, tc, false); err == nil {
				_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
				if err == nil {
					t.Errorf("%s: DescribeNamespace = nil error, want a refusal", name)
				}
			}
		}
	})

	cp, err := dialAs(t, s, ns, s.ClientTLS(), false)
	if err != nil {
		t.Fatalf("Dial(control-plane certificate) = %v", err)
	}
	site, err := dialAs(t, s, ns, agentTLS(t, ca, pki.RoleSite, "site_a"), false)
	if err != nil {
		t.Fatalf("Dial(site_a certificate) = %v", err)
	}
	t.Run("site serves its own queue", func(t *testing.T) { checkSiteWorker(t, ctx, cp, site) })
	if strings.Contains(logs.String(), "temporal call denied") {
		t.Errorf("a site worker serving its own queue was denied calls:\n%s", logs.String())
	}

	node, err := dialAs(t, s, ns, agentTLS(t, ca, pki.RoleNode, "node_a"), true)
	if err != nil {
		t.Fatalf("NewLazyClient(node certificate) = %v", err)
	}
	checkDenied(t, ctx, ns, site, node)

	t.Run("control plane", func(t *testing.T) {
		// A denied poll returns at once; an allowed one waits for a task
		// until we give up on it.
		const wait = 500 * time.Millisecond
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		time.AfterFunc(wait, cancel)
		began := time.Now()
		_, err := cp.WorkflowService().PollActivityTaskQueue(pctx, &workflowservice.PollActivityTaskQueueRequest{
			Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "site/site_b"}})
		var denied *serviceerror.PermissionDenied
		if errors.As(err, &denied) || time.Since(began) < wait {
			t.Errorf("PollActivityTaskQueue(site/site_b) as the control plane = %v after %v, want a poll until cancelled", err, time.Since(began))
		}
	})
	t.Run("web UI", func(t *testing.T) {
		if body := uiGet(t, s, "/api/v1/namespaces/"+ns); !strings.Contains(body, ns) {
			t.Errorf("GET /api/v1/namespaces/%s through the UI = %.300s, want the namespace", ns, body)
		}
	})
}

// checkSiteWorker runs a real SDK activity worker with the site's
// certificate on site/site_a, and a workflow the control plane starts that
// heartbeats and completes an activity there.
func checkSiteWorker(t *testing.T, ctx context.Context, cp, site client.Client) {
	sw := sdkworker.New(site, "site/site_a", sdkworker.Options{})
	sw.RegisterActivityWithOptions(func(ctx context.Context, in string) (string, error) {
		activity.RecordHeartbeat(ctx, "half")
		return "served " + in, nil
	}, activity.RegisterOptions{Name: "serve"})
	cw := sdkworker.New(cp, "control-plane-test", sdkworker.Options{})
	cw.RegisterWorkflowWithOptions(func(ctx workflow.Context, in string) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: "site/site_a", StartToCloseTimeout: 20 * time.Second})
		var out string
		err := workflow.ExecuteActivity(ctx, "serve", in).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "onSite"})
	for _, w := range []sdkworker.Worker{sw, cw} {
		if err := w.Start(); err != nil {
			t.Fatalf("worker.Start = %v", err)
		}
	}
	run, err := cp.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "control-plane-test",
		WorkflowExecutionTimeout: 30 * time.Second}, "onSite", "x")
	if err != nil {
		t.Fatalf("ExecuteWorkflow(as the control plane) = %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "served x" {
		t.Errorf("workflow onSite(x) = %q, %v, want %q", out, err, "served x")
	}
	sw.Stop()
	cw.Stop()
}

// checkDenied checks what a site's and a node's certificates may not do.
func checkDenied(t *testing.T, ctx context.Context, ns string, site, node client.Client) {
	forged, err := tasktoken.NewSerializer().Serialize(&tokenspb.Task{WorkflowId: "wf", ActivityId: "step"})
	if err != nil {
		t.Fatal(err)
	}
	siteWS, nodeWS := site.WorkflowService(), node.WorkflowService()
	tests := []struct {
		name string
		call func(context.Context) error
	}{
		{"site polls another site's queue", func(ctx context.Context) error {
			_, err := siteWS.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
				Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "site/site_b"}})
			return err
		}},
		{"site polls workflow tasks of another site", func(ctx context.Context) error {
			_, err := siteWS.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{
				Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "control-plane"}})
			return err
		}},
		{"site starts a workflow", func(ctx context.Context) error {
			_, err := site.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "site/site_a"}, "onSite", "x")
			return err
		}},
		{"site completes an activity by ID", func(ctx context.Context) error {
			_, err := siteWS.RespondActivityTaskCompletedById(ctx, &workflowservice.RespondActivityTaskCompletedByIdRequest{
				Namespace: ns, WorkflowId: "wf", ActivityId: "step"})
			return err
		}},
		{"site completes with a token naming no run", func(ctx context.Context) error {
			_, err := siteWS.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
				Namespace: ns, TaskToken: forged})
			return err
		}},
		{"site lists workflows", func(ctx context.Context) error {
			_, err := siteWS.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var denied *serviceerror.PermissionDenied
			if err := tt.call(ctx); !errors.As(err, &denied) {
				t.Errorf("%s = %v, want PermissionDenied", tt.name, err)
			}
		})
	}
	// A node's certificate is not even let through the handshake: the
	// frontend takes only the control plane's and sites'.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := nodeWS.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns}); err == nil {
		t.Errorf("DescribeNamespace as a node = nil error, want the handshake refused")
	}
}
