package tracing

import (
	"context"
	"strings"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Connect is a server interceptor making one span per API call, named by
// its procedure (bettercompute.v1.MetalService/Deploy), a child of the
// caller's traceparent when it sent one; its status is the call's Connect
// code. Nil when tracing is off. Put it outermost, so the span covers the
// token check and the error mapping.
func Connect(tp trace.TracerProvider) connect.Interceptor {
	if tp == nil {
		return nil
	}
	return connectTracer{tp.Tracer("better-compute/api")}
}

type connectTracer struct{ tracer trace.Tracer }

func (c connectTracer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, span := c.start(ctx, req.Spec().Procedure, req.Header())
		defer span.End()
		resp, err := next(ctx, req)
		setCode(span, err)
		return resp, err
	}
}

func (connectTracer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (c connectTracer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, span := c.start(ctx, conn.Spec().Procedure, conn.RequestHeader())
		defer span.End()
		err := next(ctx, conn)
		setCode(span, err)
		return err
	}
}

func (c connectTracer) start(ctx context.Context, procedure string, h map[string][]string) (context.Context, trace.Span) {
	name := strings.TrimPrefix(procedure, "/")
	service, method, _ := strings.Cut(name, "/")
	ctx = Extract(ctx, h)
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("rpc.system", "connect_rpc"), attribute.String("rpc.service", service), attribute.String("rpc.method", method)))
}

// setCode records the call's Connect code; an error's message stays out of
// the span (it may quote the request).
func setCode(span trace.Span, err error) {
	if err == nil {
		return
	}
	code := connect.CodeOf(err).String()
	span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", code))
	span.SetStatus(codes.Error, code)
}
