package api_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/better-compute/better-compute/api"
	bcv1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
)

// grpcConn serves the API over h2c, as `serve` does, and dials it with
// grpc-go, as grpcurl does.
func grpcConn(t *testing.T, e *env) *grpc.ClientConn {
	t.Helper()
	srv := httptest.NewUnstartedServer(api.New(api.Config{Store: e.store}).Handler())
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestGRPCDiscovery: without a token, gRPC reflection lists every service
// and describes them, and the health check answers SERVING; the services
// themselves still want the token, and answer with it.
func TestGRPCDiscovery(t *testing.T) {
	e := newEnv(t)
	conn := grpcConn(t, e)
	ctx := t.Context()

	stream, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectpb.ServerReflectionRequest{
		MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection ListServices: %v", err)
	}
	var got []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	want := []string{"bettercompute.v1.CommandsService", "bettercompute.v1.HardwareProfilesService",
		"bettercompute.v1.ImagesService", "bettercompute.v1.MetalService", "bettercompute.v1.PoolsService",
		"bettercompute.v1.ProfilesService", "bettercompute.v1.SiteTokensService", "bettercompute.v1.SitesService",
		"bettercompute.v1.TenantSecretsService",
		"bettercompute.v1.TenantsService", "bettercompute.v1.WorkflowsService"}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reflection ListServices (-want +got):\n%s", diff)
	}

	// grpcurl describe: the file declaring a service comes back.
	if err := stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "bettercompute.v1.MetalService"}}); err != nil {
		t.Fatal(err)
	}
	resp, err = stream.Recv()
	if err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("reflection FileContainingSymbol(MetalService) = %v, %v; want its file", resp.GetErrorResponse(), err)
	}

	health := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "bettercompute.v1.MetalService"} {
		h, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Health/Check(%q) = %v, %v; want SERVING", svc, h.GetStatus(), err)
		}
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope.v1.Nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("Health/Check(nope.v1.Nope) = %v, want NotFound", err)
	}

	list := func(ctx2 ...string) error {
		out := new(bcv1.ListTenantsResponse)
		c := ctx
		if len(ctx2) > 0 {
			c = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+ctx2[0])
		}
		return conn.Invoke(c, "/bettercompute.v1.TenantsService/List", &bcv1.ListTenantsRequest{}, out)
	}
	if err := list(); status.Code(err) != codes.Unauthenticated {
		t.Errorf("TenantsService/List without a token = %v, want Unauthenticated", err)
	}
	if err := list(e.root); err != nil {
		t.Errorf("TenantsService/List with the root token = %v, want nil", err)
	}
}
