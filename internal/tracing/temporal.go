package tracing

import (
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/better-compute/better-compute/errs"
)

// Temporal is the Temporal SDK's tracing interceptor over tp, for
// client.Options.Interceptors: the client makes a StartWorkflow span as a
// child of the caller's span and carries its context in the workflow's
// header; a worker made from that client (it takes the client's
// interceptors) makes RunWorkflow, StartActivity and RunActivity spans,
// each a child of the one before, across processes. Nil when tracing is off.
func Temporal(tp trace.TracerProvider) ([]interceptor.ClientInterceptor, error) {
	if tp == nil {
		return nil, nil
	}
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("temporal-sdk-go")})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "the Temporal tracing interceptor")
	}
	return []interceptor.ClientInterceptor{i}, nil
}
