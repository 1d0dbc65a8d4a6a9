package bare

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/tserver"
)

const testNamespace = "bc"

// TestRunAsTheControlPlane runs two workflows of one machine on a server
// configured as the control plane's with a CA (mTLS only, the authorizer,
// the namespace's search attributes), through a control-plane client and a
// site's, both with the payload codec, and reads each flow back from its
// history: the same steps with the same options, the same search
// attributes, encrypted payloads, no heartbeat (ours send none in a
// command of milliseconds; the heartbeating steps sent one each before, 9 ms
// of a loop's CPU that ours did not spend), and a site's client refused what
// only the control plane may do.
func TestRunAsTheControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, ca := startServer(t, ctx)
	key := make([]byte, codec.KeySize)
	rand.Read(key)
	var beats rpcCount
	home := dial(t, ctx, srv.FrontendAddress(), key, srv.ClientTLS(), &beats)
	siteTLS, err := SiteTLS(ca, "site_bare", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	away := dial(t, ctx, srv.FrontendAddress(), key, siteTLS, &beats)
	b, err := Start(Config{Home: home, Away: away, AwayQueue: kinds.SiteTaskQueue("site_bare")})
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	t.Cleanup(b.Stop)

	retry := func(attempts int32) *temporal.RetryPolicy {
		return &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: attempts, NonRetryableErrorTypes: []string{"INVALID_INPUT", "UNVERIFIED_WIPE"}}
	}
	local := Step{Kind: Local}
	cp := Step{Kind: Home, StartToClose: time.Minute, Retry: retry(10)}
	bmc := Step{Kind: Away, StartToClose: 2 * time.Minute, Retry: retry(8)}
	ramdisk := Step{Kind: Away, StartToClose: 15 * time.Minute, Heartbeat: 20 * time.Second, Retry: retry(8)}
	sa := temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword("NodeId").ValueSet("node_1"),
		temporal.NewSearchAttributeKeyInt64("ProfileVersion").ValueSet(3))
	flows := []Flow{
		{Plan{cp, local, bmc, local, local, ramdisk, local, cp}, sa},
		{Plan{local, ramdisk, local, cp, cp}, sa},
	}
	runs, err := b.Run(ctx, "m1", flows)
	if err != nil || len(runs) != len(flows) {
		t.Fatalf("Run(m1) = %d runs, %v; want %d", len(runs), err, len(flows))
	}
	for i, runID := range runs {
		checkRun(t, home, runID, flows[i])
	}
	if got := beats.of("RecordActivityTaskHeartbeat"); got != 0 {
		t.Errorf("the baseline sent %d RecordActivityTaskHeartbeat calls, want none", got)
	}
	_, err = away.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "bare/forged", TaskQueue: HomeQueue}, "bare.loop", Input{})
	if pd := (*serviceerror.PermissionDenied)(nil); !errors.As(err, &pd) {
		t.Errorf("ExecuteWorkflow with a site's certificate = %v, want PermissionDenied from the authorizer", err)
	}
	if l, r := flows[0].Plan.Counts(); l != 4 || r != 4 {
		t.Errorf("Counts(%v) = %d local, %d regular; want 4, 4", flows[0].Plan, l, r)
	}
}

// checkRun reads run's flow back from its raw history.
func checkRun(t *testing.T, c client.Client, runID string, want Flow) {
	t.Helper()
	h := history(t, c, "bare/m1", runID)
	got, err := FlowOf(h, HomeQueue)
	if err != nil {
		t.Fatalf("FlowOf(run %s) = %v", runID, err)
	}
	if diff := cmp.Diff(want.Plan, got.Plan); diff != "" {
		t.Errorf("FlowOf(run %s).Plan (-want +got):\n%s", runID, diff)
	}
	if diff := cmp.Diff(Values(want.SearchAttributes), Values(got.SearchAttributes)); diff != "" {
		t.Errorf("FlowOf(run %s).SearchAttributes (-want +got):\n%s", runID, diff)
	}
	in := h[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(in) != 1 || string(in[0].GetMetadata()[codec.MetadataEncoding]) != codec.EncodingEncrypted {
		t.Errorf("run %s: input payloads %v, want one encrypted by the codec", runID, in)
	}
	// No-op activities run in next to no time of the workflow's.
	if tm := Times(h); tm.Wall <= 0 || tm.InActivities < 0 || tm.InActivities > tm.Wall/2 || tm.InTasks <= 0 ||
		tm.InActivities+tm.ActivityWait+tm.InTasks+tm.TaskWait > tm.Wall {
		t.Errorf("Times(run %s) = %+v; want wall > 0, under half of it in no-ops, some in workflow tasks, and the parts within the wall", runID, tm)
	}
}

// startServer starts an embedded server as the control plane does with a
// CA: its frontend speaks mTLS only, with a control-plane serving
// certificate, and authorizes by certificate.
func startServer(t *testing.T, ctx context.Context) (*tserver.Server, *pki.CA) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.Init(filepath.Join(dir, "pki"), "bare.test")
	if err != nil {
		t.Fatal(err)
	}
	k, keyPEM, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.IssueServer(k.Public(), pki.RoleControlPlane, "control-plane", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tserver.TLS{CertFile: filepath.Join(dir, "frontend.crt"), KeyFile: filepath.Join(dir, "frontend.key"),
		CAFile: filepath.Join(dir, "pki", pki.CACertFile)}
	if err := os.WriteFile(tc.CertFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tc.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := tserver.Start(ctx, tserver.Config{DataDir: dir, Namespace: testNamespace, UIPort: -1, TLS: tc})
	if err != nil {
		t.Fatalf("tserver.Start = %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv, ca
}

func dial(t *testing.T, ctx context.Context, addr string, key []byte, tc *tls.Config, calls *rpcCount) client.Client {
	t.Helper()
	opts := options(addr, testNamespace, key, tc)
	opts.ConnectionOptions.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(calls.intercept)}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		t.Fatalf("Dial(%s) = %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// rpcCount counts a client's calls by method name (the last element of
// the gRPC method).
type rpcCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCount) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[path.Base(method)]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCount) of(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

func history(t *testing.T, c client.Client, id, runID string) []*historypb.HistoryEvent {
	t.Helper()
	iter := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	return events
}
func TestTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ev := func(id int64, at int, attrs any) *historypb.HistoryEvent {
		e := &historypb.HistoryEvent{EventId: id, EventTime: timestamppb.New(t0.Add(ms(at)))}
		switch a := attrs.(type) {
		case *historypb.WorkflowTaskStartedEventAttributes:
			e.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: a}
		case *historypb.WorkflowTaskCompletedEventAttributes:
			e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: a}
		case *historypb.ActivityTaskScheduledEventAttributes:
			e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: a}
		case *historypb.ActivityTaskStartedEventAttributes:
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: a}
		case *historypb.ActivityTaskCompletedEventAttributes:
			e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: a}
		case *historypb.ActivityTaskFailedEventAttributes:
			e.Attributes = &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: a}
		}
		return e
	}
	for _, tc := range []struct {
		name    string
		history []*historypb.HistoryEvent
		want    Timing
	}{
		{"empty", nil, Timing{}},
		{"no activities", []*historypb.HistoryEvent{ev(1, 0, nil), ev(2, 1000, nil)}, Timing{Wall: ms(1000)}},
		{"two activities, one failed", []*historypb.HistoryEvent{
			ev(1, 0, nil),
			ev(2, 10, nil), // workflow task scheduled
			ev(3, 40, &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: 2}),
			ev(4, 140, &historypb.WorkflowTaskCompletedEventAttributes{StartedEventId: 3}),
			ev(5, 1000, &historypb.ActivityTaskScheduledEventAttributes{ActivityType: &commonpb.ActivityType{Name: "power.setPower"}}),
			ev(6, 2000, &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: 5}),
			ev(7, 5000, &historypb.ActivityTaskCompletedEventAttributes{StartedEventId: 6}),
			ev(8, 5000, nil), // workflow task scheduled
			ev(9, 5005, &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: 8}),
			ev(10, 5800, &historypb.ActivityTaskScheduledEventAttributes{ActivityType: &commonpb.ActivityType{Name: "disk.wipe"}}),
			ev(11, 6000, &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: 10}),
			ev(12, 6500, &historypb.ActivityTaskFailedEventAttributes{StartedEventId: 11}),
			ev(20, 10000, nil),
		}, Timing{Wall: ms(10000), InActivities: ms(3500), ActivityWait: ms(1200), InTasks: ms(100), TaskWait: ms(35), FirstTaskWait: ms(30),
			ByType: map[string]Running{"power.setPower": {1, ms(3000)}, "disk.wipe": {1, ms(500)}}}},
	} {
		if diff := cmp.Diff(tc.want, Times(tc.history)); diff != "" {
			t.Errorf("Times(%s) (-want +got):\n%s", tc.name, diff)
		}
	}
}

// starter is a client whose starts answer as its answers say, in turn.
type starter struct {
	client.Client
	answers []error
	opts    []client.StartWorkflowOptions
}

func (s *starter) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.opts = append(s.opts, opts)
	err := s.answers[len(s.opts)-1]
	if err != nil {
		return nil, err
	}
	return doneRun{}, nil
}

// GetWorkflow is the run a start answered, for its result.
func (s *starter) GetWorkflow(context.Context, string, string) client.WorkflowRun { return doneRun{} }

// doneRun is a run that completed its one step.
type doneRun struct{ client.WorkflowRun }

func (doneRun) GetID() string    { return "bare/m1" }
func (doneRun) GetRunID() string { return "run-1" }
func (doneRun) Get(_ context.Context, out any) error {
	*out.(*Result) = Result{Steps: 1}
	return nil
}

// TestRunAsksAgainAnUnansweredStart: a start the server did not answer in
// time is asked again, then finding the workflow running is an answer (the
// first may have started it); a refused start is not asked again.
func TestRunAsksAgainAnUnansweredStart(t *testing.T) {
	flows := []Flow{{Plan: Plan{{Kind: Local}}}}
	s := &starter{answers: []error{serviceerror.NewDeadlineExceeded("context deadline exceeded"), nil}}
	b := &Baseline{cfg: Config{Home: s}}
	runs, err := b.Run(context.Background(), "m1", flows)
	if err != nil || len(runs) != 1 {
		t.Fatalf("Run after an unanswered start = %v, %v; want one run", runs, err)
	}
	if len(s.opts) != 2 || !s.opts[0].WorkflowExecutionErrorWhenAlreadyStarted || s.opts[1].WorkflowExecutionErrorWhenAlreadyStarted {
		t.Errorf("starts asked %d times; want 2, the second taking a running workflow as started", len(s.opts))
	}
	s = &starter{answers: []error{serviceerror.NewInvalidArgument("no"), nil}}
	b = &Baseline{cfg: Config{Home: s}}
	if _, err := b.Run(context.Background(), "m1", flows); err == nil || len(s.opts) != 1 {
		t.Errorf("Run after a refused start = %v after %d starts; want its error after 1", err, len(s.opts))
	}
}
