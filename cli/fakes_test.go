package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// call is one request the fake API received, as it came over the wire.
type call struct {
	procedure string
	body      map[string]any
	auth      string
	tenant    string
}

// recorder keeps the requests that reached the fake API.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (r *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(b))
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		r.mu.Lock()
		r.calls = append(r.calls, call{
			procedure: req.URL.Path, body: body,
			auth: req.Header.Get("Authorization"), tenant: req.Header.Get(TenantHeader),
		})
		r.mu.Unlock()
		next.ServeHTTP(w, req)
	})
}

func (r *recorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// newAPI serves the generated Connect handlers over a real HTTP listener.
func newAPI(t *testing.T) (*recorder, string) {
	t.Helper()
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewTenantsServiceHandler(tenants{}))
	mux.Handle(bettercomputev1connect.NewSitesServiceHandler(sites{}))
	mux.Handle(bettercomputev1connect.NewSiteTokensServiceHandler(siteTokens{}))
	mux.Handle(bettercomputev1connect.NewPoolsServiceHandler(pools{}))
	mux.Handle(bettercomputev1connect.NewImagesServiceHandler(images{}))
	mux.Handle(bettercomputev1connect.NewProfilesServiceHandler(profiles{}))
	mux.Handle(bettercomputev1connect.NewHardwareProfilesServiceHandler(hardwareProfiles{}))
	mux.Handle(bettercomputev1connect.NewWorkflowsServiceHandler(workflows{}))
	srv := httptest.NewServer(rec.wrap(mux))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

func ok[T any](m *T) (*connect.Response[T], error) { return connect.NewResponse(m), nil }

// apiError is an error as the real API sends it: a code and an ErrorDetail.
func apiError(code connect.Code, kind, field, msg string) error {
	e := connect.NewError(code, errors.New(msg))
	d, err := connect.NewErrorDetail(&v1.ErrorDetail{Kind: kind, Field: field, Op: "test"})
	if err != nil {
		panic(err)
	}
	e.AddDetail(d)
	return e
}

type tenants struct {
	bettercomputev1connect.UnimplementedTenantsServiceHandler
}

func (tenants) Create(_ context.Context, r *connect.Request[v1.CreateTenantRequest]) (*connect.Response[v1.CreateTenantResponse], error) {
	return ok(&v1.CreateTenantResponse{Tenant: &v1.Tenant{Id: r.Msg.GetId()}, Token: "bct_tenant_secret"})
}

func (tenants) List(context.Context, *connect.Request[v1.ListTenantsRequest]) (*connect.Response[v1.ListTenantsResponse], error) {
	return ok(&v1.ListTenantsResponse{Items: []*v1.Tenant{{Id: "root"}, {Id: "acme"}}})
}

type sites struct {
	bettercomputev1connect.UnimplementedSitesServiceHandler
}

func (sites) Create(_ context.Context, r *connect.Request[v1.CreateSiteRequest]) (*connect.Response[v1.CreateSiteResponse], error) {
	m := r.Msg
	if m.GetKind() != "shared" && m.GetKind() != "dedicated" {
		return nil, apiError(connect.CodeInvalidArgument, "INVALID_INPUT", "kind", "kind must be shared or dedicated")
	}
	return ok(&v1.CreateSiteResponse{Created: true, Site: &v1.Site{
		Id: "site_1", TenantId: m.GetTenantId(), Kind: m.GetKind(), Region: m.GetRegion(), Key: m.GetKey()}})
}

func (sites) Get(_ context.Context, r *connect.Request[v1.GetSiteRequest]) (*connect.Response[v1.GetSiteResponse], error) {
	switch r.Msg.GetId() {
	case "site_1":
		return ok(&v1.GetSiteResponse{Site: &v1.Site{Id: "site_1", TenantId: "root", Kind: "shared", Region: "lab-1"}})
	case "site_forbidden":
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("not yours"))
	}
	return nil, apiError(connect.CodeNotFound, "NOT_FOUND", "", "site "+r.Msg.GetId()+" not found")
}

func (sites) List(context.Context, *connect.Request[v1.ListSitesRequest]) (*connect.Response[v1.ListSitesResponse], error) {
	return ok(&v1.ListSitesResponse{Items: []*v1.Site{
		{Id: "site_1", TenantId: "root", Kind: "shared", Region: "lab-1", Key: "lab-1"},
		{Id: "site_2", TenantId: "root", Kind: "dedicated", Region: "lab-2"},
	}})
}

type siteTokens struct {
	bettercomputev1connect.UnimplementedSiteTokensServiceHandler
}

func (siteTokens) Create(_ context.Context, r *connect.Request[v1.CreateSiteTokenRequest]) (*connect.Response[v1.CreateSiteTokenResponse], error) {
	rec := &v1.SiteToken{Id: "stk_1", SiteId: r.Msg.GetSiteId(), Key: r.Msg.GetKey()}
	if r.Msg.GetKey() == "issued" {
		return ok(&v1.CreateSiteTokenResponse{SiteToken: rec})
	}
	return ok(&v1.CreateSiteTokenResponse{SiteToken: rec, Token: "bcst_join_secret", Created: true})
}

type pools struct {
	bettercomputev1connect.UnimplementedPoolsServiceHandler
}

func (pools) Create(_ context.Context, r *connect.Request[v1.CreatePoolRequest]) (*connect.Response[v1.CreatePoolResponse], error) {
	m := r.Msg
	return ok(&v1.CreatePoolResponse{Pool: &v1.Pool{Id: "pool_1", SiteId: m.GetSiteId(), Class: m.GetClass(), Agent: m.GetAgent(), Policy: m.GetPolicy()}})
}

func (pools) Get(_ context.Context, r *connect.Request[v1.GetPoolRequest]) (*connect.Response[v1.GetPoolResponse], error) {
	return ok(&v1.GetPoolResponse{Pool: &v1.Pool{Id: r.Msg.GetId()}})
}

func (pools) List(context.Context, *connect.Request[v1.ListPoolsRequest]) (*connect.Response[v1.ListPoolsResponse], error) {
	return ok(&v1.ListPoolsResponse{Items: []*v1.Pool{{Id: "pool_1", SiteId: "site_1", Class: "metal-host", Agent: "bcd",
		Policy: &v1.PoolPolicy{HardwareProfile: "emulated-redfish", ProvisioningCidrs: []string{"10.30.0.0/16", "10.31.0.0/16"}}}}})
}

type images struct {
	bettercomputev1connect.UnimplementedImagesServiceHandler
}

func (images) Register(_ context.Context, r *connect.Request[v1.RegisterImageRequest]) (*connect.Response[v1.RegisterImageResponse], error) {
	m := r.Msg
	return ok(&v1.RegisterImageResponse{Image: &v1.Image{Id: "img_1", Name: m.GetName(), Source: m.GetSource(), Digest: m.GetDigest(), Size: m.GetSize()}})
}

func (images) Get(_ context.Context, r *connect.Request[v1.GetImageRequest]) (*connect.Response[v1.GetImageResponse], error) {
	return ok(&v1.GetImageResponse{Image: &v1.Image{Id: r.Msg.GetId()}})
}

func (images) List(context.Context, *connect.Request[v1.ListImagesRequest]) (*connect.Response[v1.ListImagesResponse], error) {
	return ok(&v1.ListImagesResponse{})
}

type profiles struct {
	bettercomputev1connect.UnimplementedProfilesServiceHandler
}

func (profiles) Create(_ context.Context, r *connect.Request[v1.CreateProfileRequest]) (*connect.Response[v1.CreateProfileResponse], error) {
	return ok(&v1.CreateProfileResponse{Profile: r.Msg.GetProfile()})
}

func (profiles) Get(_ context.Context, r *connect.Request[v1.GetProfileRequest]) (*connect.Response[v1.GetProfileResponse], error) {
	with, _ := structpb.NewStruct(map[string]any{"action": "cycle"})
	return ok(&v1.GetProfileResponse{Profile: &v1.Profile{Id: r.Msg.GetId(), Version: max(r.Msg.GetVersion(), 3), Target: "metal",
		Steps: []*v1.ProfileStep{{Use: "power.setPower", On: "site", With: with}}}})
}

func (profiles) List(context.Context, *connect.Request[v1.ListProfilesRequest]) (*connect.Response[v1.ListProfilesResponse], error) {
	return ok(&v1.ListProfilesResponse{})
}

func (profiles) Validate(_ context.Context, r *connect.Request[v1.ValidateProfileRequest]) (*connect.Response[v1.ValidateProfileResponse], error) {
	if r.Msg.GetId() == "broken" {
		return ok(&v1.ValidateProfileResponse{Problems: []*v1.ValidationProblem{
			{Field: "steps[1].use", Message: "unknown step acme.frobnicate"}}})
	}
	return ok(&v1.ValidateProfileResponse{Valid: true})
}

func (profiles) Render(_ context.Context, r *connect.Request[v1.RenderProfileRequest]) (*connect.Response[v1.RenderProfileResponse], error) {
	action, _ := structpb.NewStruct(map[string]any{"action": "cycle"})
	device, _ := structpb.NewStruct(map[string]any{"device": "cd", "persistent": false})
	return ok(&v1.RenderProfileResponse{Profile: &v1.Profile{Id: r.Msg.GetId(), Version: r.Msg.GetProfileVersion()}, Steps: []*v1.PlannedStep{
		{Index: 0, Use: "power.setPower", RunsOn: "site", TimeoutSeconds: 120, RetrySafe: true, With: action},
		{Index: 1, Use: "media.insert", RunsOn: "site", TimeoutSeconds: 120, RetrySafe: true, FromStep: "render.iso", FromFields: []string{"url"}},
		{Index: 2, Use: "management.setBootDevice", RunsOn: "site", TimeoutSeconds: 120, RetrySafe: true, With: device},
	}})
}

func (profiles) Update(_ context.Context, r *connect.Request[v1.UpdateProfileRequest]) (*connect.Response[v1.UpdateProfileResponse], error) {
	out := &v1.UpdateProfileResponse{}
	for v := int32(1); v <= 2; v++ {
		out.Items = append(out.Items, &v1.Profile{Id: r.Msg.GetId(), Version: v, Visibility: r.Msg.GetVisibility()})
	}
	return ok(out)
}

func (profiles) Delete(_ context.Context, r *connect.Request[v1.DeleteProfileRequest]) (*connect.Response[v1.DeleteProfileResponse], error) {
	if r.Msg.GetId() == "in-use" {
		return nil, apiError(connect.CodeFailedPrecondition, "INVALID_STATE", "", `profile "in-use" (every version) is deployed on node_1; undeploy them first`)
	}
	return ok(&v1.DeleteProfileResponse{Versions: []int32{max(r.Msg.GetProfileVersion(), 1)}})
}

type hardwareProfiles struct {
	bettercomputev1connect.UnimplementedHardwareProfilesServiceHandler
}

func (hardwareProfiles) List(context.Context, *connect.Request[v1.ListHardwareProfilesRequest]) (*connect.Response[v1.ListHardwareProfilesResponse], error) {
	return ok(&v1.ListHardwareProfilesResponse{Items: []*v1.HardwareProfile{{Id: "emulated-redfish", Description: "QEMU",
		Drivers: &v1.HardwareDrivers{Power: "redfish", Management: "redfish", Boot: "ipxe", Deploy: "image-stream"}}}})
}

type workflows struct {
	bettercomputev1connect.UnimplementedWorkflowsServiceHandler
}

func (workflows) List(_ context.Context, r *connect.Request[v1.ListWorkflowsRequest]) (*connect.Response[v1.ListWorkflowsResponse], error) {
	n := r.Msg.GetNodeId()
	return ok(&v1.ListWorkflowsResponse{Items: []*v1.Workflow{
		{WorkflowId: "enroll-" + n, NodeId: n, ProfileId: "metal-enroll", ProfileVersion: 1},
		{WorkflowId: "inspect-" + n, NodeId: n, ProfileId: "inspection", ProfileVersion: 1},
	}})
}

func (workflows) Get(_ context.Context, r *connect.Request[v1.GetWorkflowRequest]) (*connect.Response[v1.GetWorkflowResponse], error) {
	return ok(&v1.GetWorkflowResponse{Workflow: &v1.Workflow{WorkflowId: r.Msg.GetWorkflowId(), RunId: r.Msg.GetRunId()}})
}

func (workflows) Retry(_ context.Context, r *connect.Request[v1.RetryWorkflowRequest]) (*connect.Response[v1.RetryWorkflowResponse], error) {
	return ok(&v1.RetryWorkflowResponse{Workflow: &v1.Workflow{WorkflowId: r.Msg.GetWorkflowId(), RunId: "run-2"},
		ResetRunId: "run-1", FromStep: r.Msg.GetFromStep()})
}
