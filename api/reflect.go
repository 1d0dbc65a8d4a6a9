package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.temporal.io/sdk/client"

	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// Services names every service Handler serves, for gRPC reflection and
// health.
var Services = []string{
	bettercomputev1connect.TenantsServiceName,
	bettercomputev1connect.SitesServiceName,
	bettercomputev1connect.SiteTokensServiceName,
	bettercomputev1connect.PoolsServiceName,
	bettercomputev1connect.ImagesServiceName,
	bettercomputev1connect.ProfilesServiceName,
	bettercomputev1connect.HardwareProfilesServiceName,
	bettercomputev1connect.WorkflowsServiceName,
	bettercomputev1connect.MetalServiceName,
	bettercomputev1connect.CommandsServiceName,
	bettercomputev1connect.TenantSecretsServiceName,
}

// mountDiscovery serves gRPC server reflection (v1 and v1alpha) and the gRPC
// health service, so grpcurl and buf curl find the API. Neither needs a
// token: they say what the API is and whether it answers, never its data.
// They get no handler options, hence none of the services' interceptors.
func (s *Server) mountDiscovery(mux *http.ServeMux) {
	reflector := grpcreflect.NewStaticReflector(Services...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle(grpchealth.NewHandler(checker{s}))
}

// checker answers gRPC health checks as /healthz does: SERVING when
// Postgres answers and Temporal, if this process has a client, does too.
type checker struct{ s *Server }

func (c checker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && !slices.Contains(Services, req.Service) {
		return nil, connect.NewError(connect.CodeNotFound, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.s.store.Pool().Ping(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	if c.s.temporal != nil {
		if _, err := c.s.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
		}
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
