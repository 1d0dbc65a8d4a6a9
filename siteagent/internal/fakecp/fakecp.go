// Package fakecp owns a fake control plane for the site agent's tests: a
// real TLS server (certificate from a real project CA) serving the
// JoinService (Join and Renew), SecretsService and DiscoveriesService over
// Connect, counting calls and noting which client certificate callers
// present.
package fakecp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// TrustDomain is the fake project's trust domain.
const TrustDomain = "site.example.test"

// TemporalServerName is the Temporal frontend's name a site join answers
// with, asking for mTLS.
const TemporalServerName = "temporal.site.example.test"

// CP is a fake control plane.
type CP struct {
	CA     *pki.CA
	CAFile string // the CA certificate's path, for --ca-file
	Srv    *httptest.Server
	SiteID string
	Joins  atomic.Int32 // JoinService.Join calls
	Renews atomic.Int32 // JoinService.Renew calls, answered or refused
	// RenewTTL is the lifetime of renewed certificates; RefuseRenew makes
	// Renew fail UNAVAILABLE.
	RenewTTL    time.Duration
	RefuseRenew atomic.Bool
	// RenewCodecKey is the payload key a renewal answers with (the
	// tenant's current one, as after a rotation); none when nil.
	RenewCodecKey atomic.Pointer[[]byte]
	// Frontends are the Temporal frontends a join answers with (the first
	// also in temporal_address); RenewFrontends those a renewal answers with
	// (the control plane's current ones), none when nil.
	Frontends      []string
	RenewFrontends atomic.Pointer[[]string]
	// Secrets are the values SecretsService resolves, by reference.
	Secrets map[string]map[string]string
	// Discoveries are the PXE discoveries site agents reported.
	Discoveries *Discoveries

	mu       sync.Mutex
	lastJoin *v1.JoinRequest
	// announced are the BMC drivers the last Announce gave, announcedSteps
	// its step descriptors.
	announced      []string
	announcedSteps []*structpb.Struct
	// lastPeer is the serial of the last client certificate presented.
	lastPeer string
}

// Start runs a fake control plane until the test ends.
func Start(t testing.TB) *CP {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.Init(dir, TrustDomain)
	if err != nil {
		t.Fatalf("pki.Init() = %v", err)
	}
	cp := &CP{CA: ca, CAFile: dir + "/" + pki.CACertFile, SiteID: "site_01k5w0000000000000000000aa", Secrets: map[string]map[string]string{},
		RenewTTL: 2 * time.Hour, Frontends: []string{"127.0.0.1:1"}}
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewJoinServiceHandler(cp))
	path, h := bettercomputev1connect.NewSecretsServiceHandler(cp)
	mux.Handle(path, cp.requireSite(h))
	cp.Discoveries = &Discoveries{}
	path, h = bettercomputev1connect.NewDiscoveriesServiceHandler(cp.Discoveries)
	mux.Handle(path, cp.requireSite(h))
	cp.Srv = httptest.NewUnstartedServer(cp.notePeer(mux))
	cp.Srv.TLS = cp.ServerTLS(t, tls.VerifyClientCertIfGiven)
	cp.Srv.EnableHTTP2 = true
	cp.Srv.StartTLS()
	t.Cleanup(cp.Srv.Close)
	return cp
}

// ServerTLS returns a TLS config serving 127.0.0.1 with a control-plane
// certificate, checking client certificates per auth.
func (cp *CP) ServerTLS(t testing.TB, auth tls.ClientAuthType) *tls.Config {
	t.Helper()
	key, keyPEM, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := cp.CA.IssueServer(key.Public(), pki.RoleControlPlane, "cp-1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.CA.ServerTLS(certPEM, keyPEM, pki.Want{Roles: pki.Roles(), Optional: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientAuth = auth
	cfg.VerifyConnection = nil
	return cfg
}

// URL is the control plane's base URL.
func (cp *CP) URL() string { return cp.Srv.URL }

// LastPeerSerial returns the serial (hex) of the last client certificate a
// caller presented, "" before any.
func (cp *CP) LastPeerSerial() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.lastPeer
}

type tlsKey struct{}

// notePeer records the serial of the client certificate of each request
// and hands handlers the request's TLS state.
func (cp *CP) notePeer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cp.mu.Lock()
			cp.lastPeer = r.TLS.PeerCertificates[0].SerialNumber.Text(16)
			cp.mu.Unlock()
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tlsKey{}, r.TLS)))
	})
}

// Announce records what a site agent announced.
func (cp *CP) Announce(_ context.Context, req *connect.Request[v1.AnnounceRequest]) (*connect.Response[v1.AnnounceResponse], error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.announced = req.Msg.BmcDrivers
	cp.announcedSteps = req.Msg.Steps
	return connect.NewResponse(&v1.AnnounceResponse{}), nil
}

// Announced returns the BMC drivers the last Announce gave (nil: none came).
func (cp *CP) Announced() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.announced
}

// AnnouncedSteps returns the step descriptors the last Announce gave.
func (cp *CP) AnnouncedSteps() []*structpb.Struct {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.announcedSteps
}

// Renew renews a verified site agent's certificates for the key of the
// certificate it presents, RenewTTL long.
func (cp *CP) Renew(ctx context.Context, req *connect.Request[v1.RenewRequest]) (*connect.Response[v1.JoinResponse], error) {
	cp.Renews.Add(1)
	if cp.RefuseRenew.Load() {
		return nil, connect.NewError(connect.CodeUnavailable, errs.New(errs.Unavailable, "renewals are refused"))
	}
	st, _ := ctx.Value(tlsKey{}).(*tls.ConnectionState)
	if st == nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, errs.New(errs.Unauthenticated, "no TLS"))
	}
	role, id, err := pki.PeerIdentity(*st, TrustDomain)
	if err != nil || role != pki.RoleSite || id != cp.SiteID {
		return nil, connect.NewError(connect.CodeUnauthenticated, errs.New(errs.Unauthenticated, "site agents of %s only", cp.SiteID))
	}
	pub := pki.PublicKeyOf(st.PeerCertificates[0])
	resp := &v1.JoinResponse{CaPem: cp.CA.CertPEM(), SiteId: cp.SiteID, TenantId: "tnt_root", Identity: cp.SiteID}
	if k := cp.RenewCodecKey.Load(); k != nil {
		resp.CodecKey = *k
	}
	if f := cp.RenewFrontends.Load(); f != nil {
		resp.TemporalAddresses = *f
	}
	resp.CertPem, err = cp.CA.Issue(pub, pki.RoleSite, cp.SiteID, cp.RenewTTL)
	if err == nil && len(req.Msg.GetServeHosts()) > 0 {
		resp.ServingCertPem, err = cp.CA.IssueServer(pub, pki.RoleSite, cp.SiteID, req.Msg.GetServeHosts(), cp.RenewTTL)
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(resp), nil
}

// LastJoin returns the last join request.
func (cp *CP) LastJoin() *v1.JoinRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.lastJoin
}

// Join admits a site agent with token "bcsite_good" and a ramdisk with
// "bcdisc_good" (as node_01k5w…01).
func (cp *CP) Join(_ context.Context, req *connect.Request[v1.JoinRequest]) (*connect.Response[v1.JoinResponse], error) {
	cp.Joins.Add(1)
	m := req.Msg
	cp.mu.Lock()
	cp.lastJoin = m
	cp.mu.Unlock()
	pub, err := pki.ParsePublicKey(m.GetPublicKeyPem())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	resp := &v1.JoinResponse{CaPem: cp.CA.CertPEM(), SiteId: cp.SiteID, TenantId: "tnt_root"}
	switch {
	case m.GetRole() == "site" && m.GetToken() == "bcsite_good":
		resp.Identity = cp.SiteID
		resp.CertPem, err = cp.CA.Issue(pub, pki.RoleSite, cp.SiteID, time.Hour)
		if err == nil {
			resp.ServingCertPem, err = cp.CA.IssueServer(pub, pki.RoleSite, cp.SiteID, m.GetServeHosts(), time.Hour)
		}
		resp.TemporalAddress, resp.TemporalAddresses = cp.Frontends[0], cp.Frontends
		resp.TemporalNamespace, resp.TaskQueue = "default", "site/"+cp.SiteID
		resp.TemporalTls, resp.TemporalServerName = true, TemporalServerName
		resp.CodecKey = make([]byte, 32)
		_, _ = rand.Read(resp.CodecKey)
	case m.GetRole() == "ramdisk" && m.GetToken() == "bcdisc_good":
		resp.Identity = "node_01k5w000000000000000000001"
		resp.CertPem, err = cp.CA.Issue(pub, pki.RoleRamdisk, resp.Identity, time.Hour)
	default:
		return nil, connect.NewError(connect.CodeUnauthenticated, errs.New(errs.Unauthenticated, "unknown or used token"))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(resp), nil
}

// Resolve serves Secrets to verified site agents only.
func (cp *CP) Resolve(_ context.Context, req *connect.Request[v1.ResolveSecretRequest]) (*connect.Response[v1.ResolveSecretResponse], error) {
	v, ok := cp.Secrets[req.Msg.GetRef()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errs.New(errs.NotFound, "no secret %s", req.Msg.GetRef()))
	}
	return connect.NewResponse(&v1.ResolveSecretResponse{Values: v}), nil
}

// requireSite admits only verified site agents' certificates.
func (cp *CP) requireSite(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "no TLS", http.StatusUnauthorized)
			return
		}
		role, _, err := pki.PeerIdentity(*r.TLS, TrustDomain)
		if err != nil || role != pki.RoleSite {
			http.Error(w, "site agents only", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
