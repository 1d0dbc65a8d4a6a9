package tserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/tserver/searchattrs"
)

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startServer(t *testing.T, ctx context.Context, cfg Config) *Server {
	t.Helper()
	began := time.Now()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", cfg, err)
	}
	t.Logf("Start(dataDir=%q) took %v", cfg.DataDir, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop() = %v", err)
		}
	})
	return s
}

func dial(t *testing.T, s *Server, ns string) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.FrontendAddress(), Namespace: ns})
	if err != nil {
		t.Fatalf("client.Dial(%s) = %v", s.FrontendAddress(), err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestFileBackedRestart starts a server on a data dir, starts a workflow with
// a search attribute, restarts the server on the same dir and finds the
// workflow again by a visibility query; the UI answers on both runs.
func TestFileBackedRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "bc-test"
	dir := t.TempDir()
	const codecURL = "http://127.0.0.1:8080/codec"
	// No gate: the UI server's own wiring is under test here, the gate in package webui.
	open := func(h http.Handler) http.Handler { return h }
	cfg := Config{DataDir: dir, Namespace: ns, CodecEndpoint: codecURL, UIGate: open, Logger: testLogger()}

	s1 := startServer(t, ctx, cfg)
	if _, err := os.Stat(filepath.Join(dir, DatabaseFile+"-wal")); err != nil {
		t.Errorf("database is not in WAL mode: %v", err)
	}
	if s, err := Start(ctx, Config{DataDir: dir, Namespace: ns, UIPort: -1, Logger: testLogger()}); !errs.Is(err, errs.InvalidState) {
		if err == nil {
			s.Stop()
		}
		t.Errorf("Start(same data dir while running) = %v, want INVALID_STATE", err)
	}
	checkUI(t, s1)
	if body := uiGet(t, s1, "/api/v1/settings"); !strings.Contains(body, codecURL) {
		t.Errorf("GET /api/v1/settings = %s, want the codec endpoint %s", body, codecURL)
	}
	if body := uiGet(t, s1, "/api/v1/namespaces/"+ns); !strings.Contains(body, ns) {
		t.Errorf("GET /api/v1/namespaces/%s (through the UI to the frontend) = %s, want the namespace", ns, body)
	}
	c1 := dial(t, s1, ns)
	for i := range 2 {
		if err := RegisterSearchAttributes(ctx, c1, ns); err != nil {
			t.Fatalf("RegisterSearchAttributes #%d = %v", i+1, err)
		}
	}
	run, err := c1.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "wf-restart",
		TaskQueue: "nobody-serves-this",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(searchattrs.NodeID).ValueSet("node_x"),
			temporal.NewSearchAttributeKeyInt64(searchattrs.ProfileVersion).ValueSet(3),
		),
	}, "NobodyServes")
	if err != nil {
		t.Fatalf("ExecuteWorkflow = %v", err)
	}
	c1.Close()
	if err := s1.Stop(); err != nil {
		t.Fatalf("Stop() = %v", err)
	}
	if err := s1.Stop(); err != nil {
		t.Errorf("second Stop() = %v, want nil", err)
	}

	s2 := startServer(t, ctx, cfg)
	checkUI(t, s2)
	c2 := dial(t, s2, ns)
	ids := pollVisibility(t, ctx, c2, ns, `NodeId = "node_x" AND ProfileVersion = 3`)
	if len(ids) != 1 || ids[0] != run.GetID() {
		t.Errorf("ListWorkflow(NodeId = node_x) after restart = %v, want [%s]", ids, run.GetID())
	}
}

// pollVisibility retries query until it finds something: visibility is
// eventually consistent.
func pollVisibility(t *testing.T, ctx context.Context, c client.Client, ns, query string) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns, Query: query})
		if err != nil {
			t.Fatalf("ListWorkflow(%q) = %v", query, err)
		}
		var ids []string
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if len(ids) > 0 || time.Now().After(deadline) {
			return ids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkUI(t *testing.T, s *Server) {
	t.Helper()
	if s.UIURL() == "" {
		t.Fatalf("UIURL() = \"\", want a URL")
	}
	uiGet(t, s, "/")
}

// uiGet fetches path from the UI, wants 200 and returns the body.
func uiGet(t *testing.T, s *Server, path string) string {
	t.Helper()
	resp, err := http.Get(s.UIURL() + path)
	if err != nil {
		t.Fatalf("GET %s%s = %v", s.UIURL(), path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s%s = %d %.200s, want 200", s.UIURL(), path, resp.StatusCode, body)
	}
	return string(body)
}

// TestPortTaken checks that a busy port is a clear error, not an exit,
// found by CheckPorts too, and that Start does not try again a port it was
// asked for: before, it logged "a port picked for the Temporal server was
// taken before it bound; trying other ports" twice, then failed the same.
func TestPortTaken(t *testing.T) {
	taken := takenPort(t)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"frontend", Config{FrontendPort: taken, UIPort: -1}, "Temporal frontend address"},
		{"ui", Config{UIPort: taken}, "Temporal Web UI address"},
	}
	t.Run("ui without a gate", func(t *testing.T) {
		if s, err := Start(context.Background(), Config{Logger: testLogger()}); !errs.Is(err, errs.InvalidInput) {
			if err == nil {
				s.Stop()
			}
			t.Errorf("Start(a UI, no UIGate) = %v, want INVALID_INPUT", err)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			tt.cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			s, err := Start(context.Background(), tt.cfg)
			if err == nil {
				s.Stop()
				t.Fatalf("Start(port %d taken) = nil error, want one", taken)
			}
			if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "already in use") {
				t.Errorf("Start(port %d taken) = %v, want UNAVAILABLE naming %q and 'already in use'", taken, err, tt.want)
			}
			if strings.Contains(logs.String(), "trying other ports") {
				t.Errorf("Start(port %d taken, asked for) logged %q, want no retry of a port it did not pick", taken, logs.String())
			}
			if err := CheckPorts(tt.cfg); !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckPorts(port %d taken) = %v, want UNAVAILABLE naming %q", taken, err, tt.want)
			}
		})
	}
	if err := CheckPorts(Config{FrontendPort: 0, UIPort: 0}); err != nil {
		t.Errorf("CheckPorts(ports to pick) = %v, want nil", err)
	}
}

// TestStartRetriesATakenPick: a port Start picked for an internal service
// and another process took before the server bound it (parallel tests
// picking ports on one machine) makes Start try again with fresh ports,
// not fail "address already in use".
func TestStartRetriesATakenPick(t *testing.T) {
	taken := takenPort(t)
	picks := 0
	pickPort = func(host string) (int, error) {
		if picks++; picks == 2 { // the first attempt's matching port
			return taken, nil
		}
		return freePort(host)
	}
	defer func() { pickPort = freePort }()
	s, err := Start(context.Background(), Config{UIPort: -1, Logger: testLogger()})
	if err != nil {
		t.Fatalf("Start with a picked port taken = %v, want it started on other ports", err)
	}
	defer s.Stop()
	if picks < 4 {
		t.Errorf("Start picked %d internal ports, want a second attempt's too", picks)
	}
}

// TestStartRetriesATakenPickWithItsFrontendPort: serve's frontend port
// is fixed (7233 by default). When an internal port Start picked is taken
// after Temporal bound the frontend, the failed attempt's frontend listener
// must be closed before the next attempt, which binds the same port: before,
// it stayed open in the abandoned attempt and every retry failed "Temporal
// frontend address ... is already in use".
func TestStartRetriesATakenPickWithItsFrontendPort(t *testing.T) {
	frontend, err := freePort(loopback)
	if err != nil {
		t.Fatal(err)
	}
	taken := takenPort(t)
	picks := 0
	pickPort = func(host string) (int, error) {
		if picks++; picks == 3 { // the first attempt's worker-service port, bound after the frontend
			return taken, nil
		}
		return freePort(host)
	}
	defer func() { pickPort = freePort }()
	s, err := Start(context.Background(), Config{UIPort: -1, FrontendPort: frontend, Logger: testLogger()})
	if err != nil {
		t.Fatalf("Start on frontend port %d with a picked port taken = %v, want it started on the same frontend port", frontend, err)
	}
	defer s.Stop()
	if want := net.JoinHostPort(loopback, strconv.Itoa(frontend)); s.FrontendAddress() != want {
		t.Errorf("frontend = %s, want %s", s.FrontendAddress(), want)
	}
	// What took the pick (here this process's own listener) is not Start's
	// to release.
	c, err := net.Dial("tcp", net.JoinHostPort(loopback, strconv.Itoa(taken)))
	if err != nil {
		t.Errorf("the listener that took the picked port %d: %v, want it still listening", taken, err)
	} else {
		c.Close()
	}
}

// takenPort returns a loopback port held by a listener until the test ends.
func takenPort(t *testing.T) int {
	t.Helper()
	return listen(t).Addr().(*net.TCPAddr).Port
}

// listen returns a loopback listener, closed when the test ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
