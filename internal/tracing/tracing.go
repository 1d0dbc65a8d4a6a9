// Package tracing owns OpenTelemetry tracing for serve, bcd site and the
// ramdisk: the tracer provider made from the standard OTEL_* environment
// (off unless an OTLP endpoint is named), its flushing shutdown, and the
// pieces that carry one trace across processes — a span per API call
// (Connect), the Temporal SDK's interceptor (workflow and activity spans,
// their context in Temporal headers) and the W3C traceparent on HTTP.
//
// A nil trace.TracerProvider means tracing is off: callers install no
// interceptor and make no span, so tracing off costs nothing. No global is
// set: each process passes its provider down in its Config.
package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/buildinfo"
)

// Protocols an exporter speaks (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf" // the OpenTelemetry default, port 4318
	ProtocolGRPC = "grpc"          // port 4317
)

// Config is what Start needs; FromEnv reads it from the standard variables.
type Config struct {
	// Endpoint is the full URL spans are sent to (http://host:4318/v1/traces
	// for http/protobuf, http://host:4317 for grpc); "" turns tracing off.
	Endpoint string
	Protocol string // ProtocolHTTP when ""
	// Service is service.name unless OTEL_SERVICE_NAME names another.
	Service string
}

// FromEnv reads Config from getenv (os.Getenv in a main):
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as it is) or else
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL: /v1/traces is added for
// http/protobuf), and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL. The exporter reads the other OTEL_* settings
// itself (headers, certificates, timeout, compression, OTEL_TRACES_SAMPLER,
// OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES).
func FromEnv(getenv func(string) string, service string) Config {
	cfg := Config{Service: service, Protocol: first(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), ProtocolHTTP)}
	if ep := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); ep != "" {
		cfg.Endpoint = ep
	} else if ep := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); ep != "" {
		cfg.Endpoint = ep
		if cfg.Protocol == ProtocolHTTP {
			cfg.Endpoint = strings.TrimSuffix(ep, "/") + "/v1/traces"
		}
	}
	return cfg
}

func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Start returns the tracer provider cfg asks for, batching spans to its
// OTLP endpoint, and a shutdown that flushes what is buffered and stops the
// exporter. With no endpoint it returns a nil provider (tracing off) and a
// shutdown that does nothing.
func Start(ctx context.Context, cfg Config) (trace.TracerProvider, func(context.Context) error, error) {
	if cfg.Endpoint == "" {
		return nil, func(context.Context) error { return nil }, nil
	}
	if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, errs.Invalid("OTEL_EXPORTER_OTLP_ENDPOINT", "%q: want a URL such as http://collector:4318", cfg.Endpoint)
	}
	exp, err := exporter(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", first(cfg.Service, "better-compute")),
			attribute.String("service.version", buildinfo.Read().Version)),
		resource.WithFromEnv()) // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	if err != nil {
		return nil, nil, errs.Wrap(errs.InvalidInput, err, "OTEL_RESOURCE_ATTRIBUTES")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// exporter is the OTLP exporter for cfg's protocol and endpoint.
func exporter(ctx context.Context, cfg Config) (*otlptrace.Exporter, error) {
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch first(cfg.Protocol, ProtocolHTTP) {
	case ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	default:
		return nil, errs.New(errs.Unsupported, "OTEL_EXPORTER_OTLP_PROTOCOL %q: want %s or %s", cfg.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "OTEL_EXPORTER_OTLP_ENDPOINT %q", cfg.Endpoint)
	}
	return exp, nil
}

// Tracer is tp's tracer for the named instrumentation, a no-op one when
// tracing is off.
func Tracer(tp trace.TracerProvider, name string) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(name)
	}
	return tp.Tracer(name)
}

// propagator carries a span's context over HTTP as the W3C traceparent
// (and tracestate) header.
var propagator = propagation.TraceContext{}

// Inject writes the span context of ctx to h (nothing without a span).
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx carrying the remote span context h names, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Stop runs the shutdown Start returned, giving the exporter 5 seconds to
// send what is buffered; a failure is logged (a process ends anyway).
func Stop(shutdown func(context.Context) error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		log.Warn("traces not flushed", "err", err)
	}
}
