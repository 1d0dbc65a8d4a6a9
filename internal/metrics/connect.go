package metrics

import (
	"context"
	"strings"

	"connectrpc.com/connect"
)

// Interceptor counts every unary API call by method and Connect code ("ok"
// on success). Methods are the procedures the API serves, a bounded set.
func (m *ControlPlane) Interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			code := "ok"
			if err != nil {
				code = connect.CodeOf(err).String()
			}
			m.APIRequests.WithLabelValues(strings.TrimPrefix(req.Spec().Procedure, "/"), code).Inc()
			return resp, err
		}
	}
}
