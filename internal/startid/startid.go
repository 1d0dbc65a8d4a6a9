// Package startid gives every try of one workflow start the same request
// id. The Temporal SDK draws a new id for each ExecuteWorkflow, and bounds
// the call at 10 seconds: a start the server did not answer in time may
// still have started the workflow, and asked again under a new id it is
// refused as a second workflow of the node. Asked again under the same id,
// the server answers with the run the first try started (it keeps the ids
// that started the current run).
package startid

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

type key struct{}

// With returns ctx whose workflow starts carry id as their request id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// Of is the request id With gave ctx, "" for none.
func Of(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// Interceptor sets the request id of a StartWorkflowExecution call made
// with a context from With; every other call passes as it is.
func Interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if id := Of(ctx); id != "" {
			if r, ok := req.(*workflowservice.StartWorkflowExecutionRequest); ok {
				r.RequestId = id
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// Unanswered reports whether err says a call got no answer in time (the
// SDK's bound, or the server's), so that asking again may succeed.
func Unanswered(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	var unavailable *serviceerror.Unavailable
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || errors.As(err, &unavailable)
}
