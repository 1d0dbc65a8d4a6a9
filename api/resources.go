package api

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

type tenants struct{ *Server }

func (s tenants) Create(ctx context.Context, req *connect.Request[v1.CreateTenantRequest]) (*connect.Response[v1.CreateTenantResponse], error) {
	if p, _ := ctx.Value(principalKey{}).(principal); p.tenant != RootTenant {
		return nil, errs.New(errs.PermissionDenied, "only a root token creates tenants")
	}
	if !tenantPattern.MatchString(req.Msg.Id) {
		return nil, errs.Invalid("id", "a tenant id is 2-63 lowercase letters, digits or '-', starting with a letter, got %s", quote(req.Msg.Id))
	}
	if err := s.store.CreateTenant(ctx, req.Msg.Id); err != nil {
		return nil, err
	}
	plain, hash := pki.NewToken("api")
	if _, err := s.store.CreateAPIToken(ctx, req.Msg.Id, "initial", hash); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.CreateTenantResponse{
		Tenant: &v1.Tenant{Id: req.Msg.Id, CreatedAt: timestamppb.New(s.now())},
		Token:  string(plain),
	}), nil
}

func (s tenants) List(ctx context.Context, req *connect.Request[v1.ListTenantsRequest]) (*connect.Response[v1.ListTenantsResponse], error) {
	t, err := s.tenantOf(ctx, "")
	if err != nil {
		return nil, err
	}
	// A tenant sees itself; root sees itself too: listing every tenant is an
	// operator's database query, not an API for tenants.
	return connect.NewResponse(&v1.ListTenantsResponse{Items: []*v1.Tenant{{Id: t}}}), nil
}

type sites struct{ *Server }

func (s sites) Create(ctx context.Context, req *connect.Request[v1.CreateSiteRequest]) (*connect.Response[v1.CreateSiteResponse], error) {
	m := req.Msg
	t, err := s.tenantOf(ctx, m.TenantId)
	if err != nil {
		return nil, err
	}
	var c checks
	c.oneOf("kind", m.Kind, "shared", "dedicated")
	c.name("region", m.Region)
	c.key("key", m.Key)
	if c.err != nil {
		return nil, c.err
	}
	site, created, err := s.store.CreateSite(ctx, store.Site{ID: ids.New(ids.Site), TenantID: t,
		Kind: m.Kind, Region: m.Region, Key: m.Key, LoopbackLab: m.LoopbackLab})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.CreateSiteResponse{Site: siteOut(site), Created: created}), nil
}

func (s sites) Get(ctx context.Context, req *connect.Request[v1.GetSiteRequest]) (*connect.Response[v1.GetSiteResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	site, err := s.store.GetSite(ctx, t, req.Msg.Id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.GetSiteResponse{Site: siteOut(site)}), nil
}

func (s sites) List(ctx context.Context, req *connect.Request[v1.ListSitesRequest]) (*connect.Response[v1.ListSitesResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListSites(ctx, t)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.ListSitesResponse{Items: mapSlice(list, siteOut)}), nil
}

func siteOut(s store.Site) *v1.Site {
	return &v1.Site{Id: s.ID, TenantId: s.TenantID, Kind: s.Kind, Region: s.Region, Key: s.Key,
		LoopbackLab: s.LoopbackLab, ServeHosts: s.ServeHosts, BmcDrivers: s.BMCDrivers, CreatedAt: timestamppb.New(s.CreatedAt)}
}

type siteTokens struct{ *Server }

// Site token lifetimes.
const (
	minTokenTTL = 60 * time.Second
	maxTokenTTL = 30 * 24 * time.Hour
)

func (s siteTokens) Create(ctx context.Context, req *connect.Request[v1.CreateSiteTokenRequest]) (*connect.Response[v1.CreateSiteTokenResponse], error) {
	m := req.Msg
	t, err := s.tenantOf(ctx, m.TenantId)
	if err != nil {
		return nil, err
	}
	var c checks
	c.id("siteId", ids.Site, m.SiteId)
	// Bounded before the multiplication: a huge count would wrap to a valid TTL.
	ttl := time.Duration(0)
	if m.TtlSeconds >= int64(minTokenTTL.Seconds()) && m.TtlSeconds <= int64(maxTokenTTL.Seconds()) {
		ttl = time.Duration(m.TtlSeconds) * time.Second
	} else {
		c.fail("ttlSeconds", "want %d to %d seconds, got %d", int(minTokenTTL.Seconds()), int(maxTokenTTL.Seconds()), m.TtlSeconds)
	}
	c.key("key", m.Key)
	if c.err != nil {
		return nil, c.err
	}
	if _, err := s.store.GetSite(ctx, t, m.SiteId); err != nil {
		return nil, err
	}
	plain, hash := pki.NewToken("site")
	now := s.now()
	tok, created, err := s.store.CreateSiteToken(ctx, store.SiteToken{ID: ids.New(ids.SiteToken), TenantID: t,
		SiteID: m.SiteId, Key: m.Key, ExpiresAt: now.Add(ttl)}, hash)
	if err != nil {
		return nil, err
	}
	out := &v1.CreateSiteTokenResponse{SiteToken: siteTokenOut(tok), Created: created}
	if created {
		out.Token = string(plain)
	}
	return connect.NewResponse(out), nil
}

func siteTokenOut(t store.SiteToken) *v1.SiteToken {
	out := &v1.SiteToken{Id: t.ID, TenantId: t.TenantID, SiteId: t.SiteID, Key: t.Key,
		ExpiresAt: timestamppb.New(t.ExpiresAt), CreatedAt: timestamppb.New(t.CreatedAt)}
	if t.UsedAt != nil {
		out.UsedAt = timestamppb.New(*t.UsedAt)
	}
	return out
}

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}
