package relay

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/better-compute/kinds"
)

// handOutLocked starts c's span as a ramdisk boot takes it: "relay <kind>",
// from the hand-out to the result, a child of the span of the activity
// waiting for it. It stands for the ramdisk's handling of the command as
// the site sees it, whether or not the ramdisk traces too; its context goes
// to the ramdisk as the traceparent header. Callers hold mu.
func (r *Relay) handOutLocked(c *command, boot string) trace.SpanContext {
	endSpan(c, "handed out again")
	ctx := trace.ContextWithSpanContext(context.Background(), c.parent)
	_, c.span = r.tracer.Start(ctx, "relay "+c.cmd.Kind, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("bc.node", c.cmd.NodeID), attribute.String("bc.command", c.cmd.ID),
		attribute.String("bc.kind", c.cmd.Kind), attribute.String("bc.ramdisk_boot", boot)))
	return c.span.SpanContext()
}

// endSpan ends c's hand-out span, failed with why (an error kind or what
// happened to the command) unless why is "". Callers hold mu.
func endSpan(c *command, why string) {
	if c.span == nil {
		return
	}
	if why != "" {
		c.span.SetStatus(codes.Error, why)
	}
	c.span.End()
	c.span = nil
}

// failedAs is why a result's span failed: its error kind ("" for a success;
// INTERNAL for a failure that names none).
func failedAs(res kinds.Result) string {
	switch {
	case res.OK:
		return ""
	case res.ErrorKind == "":
		return "INTERNAL"
	}
	return res.ErrorKind
}
