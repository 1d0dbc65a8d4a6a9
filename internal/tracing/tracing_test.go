package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/internal/tracing/tracingtest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want tracing.Config
	}{
		{"nothing set: off", nil, tracing.Config{Protocol: "http/protobuf", Service: "svc"}},
		{"base endpoint gets /v1/traces", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318/"},
			tracing.Config{Endpoint: "http://jaeger:4318/v1/traces", Protocol: "http/protobuf", Service: "svc"}},
		{"traces endpoint as it is, and first", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:9999/x"},
			tracing.Config{Endpoint: "http://b:9999/x", Protocol: "http/protobuf", Service: "svc"}},
		{"grpc takes the base as it is", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			tracing.Config{Endpoint: "http://jaeger:4317", Protocol: "grpc", Service: "svc"}},
		{"traces protocol first", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			tracing.Config{Endpoint: "http://c:4317", Protocol: "grpc", Service: "svc"}},
	} {
		if diff := cmp.Diff(tc.want, tracing.FromEnv(env(tc.env), "svc")); diff != "" {
			t.Errorf("%s: FromEnv (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestOffWithoutEnv: with no OTEL variable nothing is set up: no provider,
// no interceptor, spans that record nothing, the global provider untouched.
func TestOffWithoutEnv(t *testing.T) {
	global := otel.GetTracerProvider()
	tp, shutdown, err := tracing.Start(context.Background(), tracing.FromEnv(env(nil), "svc"))
	if err != nil || tp != nil {
		t.Fatalf("Start(no env) = %v, %v; want nil, nil", tp, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutdown() = %v, want nil", err)
	}
	if i := tracing.Connect(tp); i != nil {
		t.Errorf("Connect(nil) = %v, want nil", i)
	}
	if is, err := tracing.Temporal(tp); is != nil || err != nil {
		t.Errorf("Temporal(nil) = %v, %v; want nil, nil", is, err)
	}
	_, span := tracing.Tracer(tp, "x").Start(context.Background(), "s")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("Tracer(nil).Start: recording %v, valid %v; want a no-op span", span.IsRecording(), span.SpanContext().IsValid())
	}
	if otel.GetTracerProvider() != global {
		t.Errorf("the global tracer provider changed")
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  tracing.Config
		want errs.Kind
	}{
		{tracing.Config{Endpoint: "http://127.0.0.1:1", Protocol: "http/json"}, errs.Unsupported},
		{tracing.Config{Endpoint: "collector:4318"}, errs.InvalidInput},
		{tracing.Config{Endpoint: "ftp://collector:4318"}, errs.InvalidInput},
		{tracing.Config{Endpoint: "http://"}, errs.InvalidInput},
		{tracing.Config{Endpoint: "http://a b"}, errs.InvalidInput},
	} {
		tp, _, err := tracing.Start(context.Background(), tc.cfg)
		if errs.KindOf(err) != tc.want || tp != nil {
			t.Errorf("Start(%+v) = %v, %v; want %s", tc.cfg, tp, err, tc.want)
		}
	}
}

// TestAPISpanThroughOTLP: a Connect call carrying a caller's traceparent
// gets a server span named by its procedure, a child of the caller's span,
// exported over OTLP/HTTP by Start's provider and flushed by its shutdown.
func TestAPISpanThroughOTLP(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.Start()
	defer rcv.Close()
	ctx := context.Background()
	tp, shutdown, err := tracing.Start(ctx, tracing.FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL()}), "test-svc"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker(), connect.WithInterceptors(tracing.Connect(tp))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	inject := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			tracing.Inject(ctx, req.Header())
			return next(ctx, req)
		}
	})
	cctx, caller := tp.Tracer("test").Start(ctx, "caller")
	if _, err := grpchealth.NewClient(srv.Client(), srv.URL, connect.WithInterceptors(inject)).Check(cctx, &grpchealth.CheckRequest{}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if len(rcv.Spans()) != 0 {
		t.Errorf("spans arrived before shutdown; the batcher should hold them")
	}
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown() = %v", err)
	}
	got := map[string]tracingtest.Span{}
	for _, s := range rcv.Spans() {
		got[s.Name] = s
	}
	api, call := got["grpc.health.v1.Health/Check"], got["caller"]
	if api.SpanID == "" || call.SpanID == "" {
		t.Fatalf("received %v, want the caller's and the API's spans", rcv.Spans())
	}
	if api.ParentID != call.SpanID || api.TraceID != call.TraceID {
		t.Errorf("API span parent %s trace %s, want %s in %s", api.ParentID, api.TraceID, call.SpanID, call.TraceID)
	}
	want := map[string]string{"rpc.system": "connect_rpc", "rpc.service": "grpc.health.v1.Health", "rpc.method": "Check"}
	if diff := cmp.Diff(want, api.Attrs); diff != "" {
		t.Errorf("API span attributes (-want +got):\n%s", diff)
	}
	if api.Service != "test-svc" {
		t.Errorf("service.name = %q, want test-svc", api.Service)
	}
	if _, ok := tp.(*sdktrace.TracerProvider); !ok {
		t.Errorf("Start = %T, want the SDK's provider", tp)
	}
}
