package relay

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/better-compute/better-compute/kinds"
)

// TestCommandSpan: a relayed command's span runs from its hand-out to its
// result as a child of the waiting activity's span, and its context is what
// the ramdisk is handed; a hand-out to a newer boot ends the first span
// failed and starts another under the same activity.
func TestCommandSpan(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r, err := New(Config{TrustDomain: "test.example", Tracer: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, act := tp.Tracer("test").Start(context.Background(), "RunActivity:deploy.image")
	cmd := kinds.Command{ID: "cmd-1", NodeID: "node_1", Kind: kinds.DeployImage}
	done := make(chan error, 1)
	go func() { _, err := r.Run(ctx, cmd, nil); done <- err }()

	_, first, ok := r.take(ctx, "node_1", "boot-1", 5*time.Second)
	if !ok {
		t.Fatal("take(boot-1): no command")
	}
	_, second, ok := r.take(ctx, "node_1", "boot-2", 5*time.Second) // boot-1 went away
	if !ok {
		t.Fatal("take(boot-2): the command was not handed to the newer boot")
	}
	if err := r.Result("node_1", "cmd-1", kinds.Result{OK: true}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	act.End()

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("ended spans = %d, want 3 (two hand-outs, the activity)", len(spans))
	}
	for i, want := range []struct {
		id     string
		status codes.Code
	}{{first.SpanID().String(), codes.Error}, {second.SpanID().String(), codes.Unset}} {
		s := spans[i]
		if s.Name() != "relay deploy.image" || s.SpanContext().SpanID().String() != want.id {
			t.Errorf("span %d = %s %s, want relay deploy.image %s", i, s.Name(), s.SpanContext().SpanID(), want.id)
		}
		if s.Parent().SpanID() != act.SpanContext().SpanID() || s.SpanContext().TraceID() != act.SpanContext().TraceID() {
			t.Errorf("span %d parent = %s, want the activity's %s", i, s.Parent().SpanID(), act.SpanContext().SpanID())
		}
		if s.Status().Code != want.status {
			t.Errorf("span %d status = %v (%s), want %v", i, s.Status().Code, s.Status().Description, want.status)
		}
	}
}

// TestNoTracer: without a tracer nothing is recorded and the ramdisk is
// handed no trace context.
func TestNoTracer(t *testing.T) {
	t.Parallel()
	r, err := New(Config{TrustDomain: "test.example"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = r.Run(ctx, kinds.Command{ID: "cmd-1", NodeID: "node_1", Kind: kinds.DiskWipe}, nil) }()
	_, sc, ok := r.take(ctx, "node_1", "boot-1", 5*time.Second)
	if !ok || sc.IsValid() {
		t.Errorf("take = valid %v, ok %v; want no trace context, ok", sc.IsValid(), ok)
	}
}

func TestFailedAs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res  kinds.Result
		want string
	}{
		{kinds.Result{OK: true}, ""},
		{kinds.Result{ErrorKind: "UNVERIFIED_WIPE"}, "UNVERIFIED_WIPE"},
		{kinds.Result{}, "INTERNAL"},
	} {
		if got := failedAs(tc.res); got != tc.want {
			t.Errorf("failedAs(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
}
