package api

import (
	"context"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

type pools struct{ *Server }

func (s pools) Create(ctx context.Context, req *connect.Request[v1.CreatePoolRequest]) (*connect.Response[v1.CreatePoolResponse], error) {
	m := req.Msg
	t, err := s.tenantOf(ctx, m.TenantId)
	if err != nil {
		return nil, err
	}
	if m.Agent == "" {
		m.Agent = kinds.AgentBCD
	}
	policy := m.GetPolicy()
	var c checks
	c.id("siteId", ids.Site, m.SiteId)
	c.name("class", m.Class)
	c.oneOf("agent", m.Agent, kinds.AgentBCD, kinds.AgentNone)
	if hp := policy.GetHardwareProfile(); hp != "" {
		if _, ok := s.hardware[hp]; !ok {
			c.fail("policy.hardwareProfile", "hardware profile %q is not configured; configured: [%s] (add it under hardwareProfiles in the control plane's configuration file)",
				hp, strings.Join(s.hardware.IDs(), ", "))
		}
	}
	c.cidrs("policy.provisioningCidrs", policy.GetProvisioningCidrs())
	if c.err != nil {
		return nil, c.err
	}
	pool, err := s.store.CreatePool(ctx, store.Pool{ID: ids.New(ids.Pool), TenantID: t, SiteID: m.SiteId,
		Class: m.Class, Agent: m.Agent, Policy: store.PoolPolicy{
			HardwareProfile:          policy.GetHardwareProfile(),
			TrustProvisioningNetwork: policy.GetTrustProvisioningNetwork(),
			AllowUnverifiedRelease:   policy.GetAllowUnverifiedRelease(),
			ProvisioningCidrs:        policy.GetProvisioningCidrs(),
		}})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.CreatePoolResponse{Pool: poolOut(pool)}), nil
}

func (s pools) Get(ctx context.Context, req *connect.Request[v1.GetPoolRequest]) (*connect.Response[v1.GetPoolResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	pool, err := s.store.GetPool(ctx, t, req.Msg.Id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.GetPoolResponse{Pool: poolOut(pool)}), nil
}

func (s pools) List(ctx context.Context, req *connect.Request[v1.ListPoolsRequest]) (*connect.Response[v1.ListPoolsResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListPools(ctx, t, req.Msg.SiteId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.ListPoolsResponse{Items: mapSlice(list, poolOut)}), nil
}

func poolOut(p store.Pool) *v1.Pool {
	return &v1.Pool{Id: p.ID, TenantId: p.TenantID, SiteId: p.SiteID, Class: p.Class, Agent: p.Agent,
		Policy: &v1.PoolPolicy{HardwareProfile: p.Policy.HardwareProfile,
			TrustProvisioningNetwork: p.Policy.TrustProvisioningNetwork,
			AllowUnverifiedRelease:   p.Policy.AllowUnverifiedRelease,
			ProvisioningCidrs:        p.Policy.ProvisioningCidrs},
		CreatedAt: timestamppb.New(p.CreatedAt)}
}

type images struct{ *Server }

func (s images) Register(ctx context.Context, req *connect.Request[v1.RegisterImageRequest]) (*connect.Response[v1.RegisterImageResponse], error) {
	m := req.Msg
	t, err := s.tenantOf(ctx, m.TenantId)
	if err != nil {
		return nil, err
	}
	if m.Compression == "" {
		m.Compression = "none"
	}
	var c checks
	if m.Name != "" {
		c.name("name", m.Name)
	}
	c.sourceURL("source", m.Source)
	if !digestPattern.MatchString(m.Digest) {
		c.fail("digest", "want sha256:<64 lowercase hex> of the file as served, got %s", quote(m.Digest))
	}
	c.oneOf("format", m.Format, "raw", "iso")
	c.oneOf("compression", m.Compression, "none", "gzip", "zstd", "xz")
	if m.Format == "iso" && m.Compression != "none" {
		c.fail("compression", "an iso is served as is: compression must be none")
	}
	if m.Size <= 0 {
		c.fail("size", "want the file's size in bytes, got %d", m.Size)
	}
	if c.err != nil {
		return nil, c.err
	}
	img, err := s.store.CreateImage(ctx, store.Image{ID: ids.New(ids.Image), TenantID: t, Name: m.Name,
		Source: m.Source, Digest: m.Digest, Format: m.Format, Compression: m.Compression, Size: m.Size})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.RegisterImageResponse{Image: imageOut(img)}), nil
}

func (s images) Get(ctx context.Context, req *connect.Request[v1.GetImageRequest]) (*connect.Response[v1.GetImageResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	img, err := s.store.GetImage(ctx, t, req.Msg.Id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.GetImageResponse{Image: imageOut(img)}), nil
}

func (s images) List(ctx context.Context, req *connect.Request[v1.ListImagesRequest]) (*connect.Response[v1.ListImagesResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListImages(ctx, t)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.ListImagesResponse{Items: mapSlice(list, imageOut)}), nil
}

func imageOut(i store.Image) *v1.Image {
	return &v1.Image{Id: i.ID, TenantId: i.TenantID, Name: i.Name, Source: i.Source, Digest: i.Digest,
		Format: i.Format, Compression: i.Compression, Size: i.Size, CreatedAt: timestamppb.New(i.CreatedAt)}
}

type hardwareProfiles struct{ *Server }

func (s hardwareProfiles) List(ctx context.Context, _ *connect.Request[v1.ListHardwareProfilesRequest]) (*connect.Response[v1.ListHardwareProfilesResponse], error) {
	out := &v1.ListHardwareProfilesResponse{}
	for _, id := range s.hardware.IDs() {
		h := s.hardware[id]
		out.Items = append(out.Items, &v1.HardwareProfile{Id: id, Description: h.Description,
			Drivers: &v1.HardwareDrivers{Power: h.Drivers.Power, Management: h.Drivers.Management,
				Boot: h.Drivers.Boot, Deploy: h.Drivers.Deploy}})
	}
	return connect.NewResponse(out), nil
}
