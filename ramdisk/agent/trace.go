package agent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/kinds"
)

// startSpan starts "ramdisk <kind>", a child of the site's span of the
// command that ctx carries (from the relay's traceparent); a no-op span
// when this ramdisk does not trace.
func (a *agent) startSpan(ctx context.Context, cmd kinds.Command) (context.Context, trace.Span) {
	return tracing.Tracer(a.cfg.Tracer, "better-compute/ramdisk").Start(ctx, "ramdisk "+cmd.Kind,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("bc.node", a.nodeID),
			attribute.String("bc.command", cmd.ID), attribute.String("bc.kind", cmd.Kind)))
}

// endSpan ends a command's span with its outcome: the error kind (never
// the message, which may quote the machine's data), or that the result did
// not reach the site.
func endSpan(span trace.Span, res kinds.Result, posted bool) {
	switch {
	case !res.OK:
		span.SetStatus(codes.Error, res.ErrorKind)
	case !posted:
		span.SetStatus(codes.Error, "result not delivered")
	}
	span.End()
}

// flushTraces sends the spans ended so far before the machine leaves the
// ramdisk (kexec does not return on real hardware).
func (a *agent) flushTraces(ctx context.Context) {
	if f, ok := a.cfg.Tracer.(interface{ ForceFlush(context.Context) error }); ok {
		if err := f.ForceFlush(ctx); err != nil {
			a.log.Warn("ramdisk: traces not flushed before kexec", "err", err)
		}
	}
}
