package api

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

// Certificate lifetimes by role.
const (
	siteCertTTL    = 30 * 24 * time.Hour
	ramdiskCertTTL = 24 * time.Hour
	nodeCertTTL    = 30 * 24 * time.Hour
)

// Agents is what the agents' listener needs: the CA that certifies agents,
// and what a site agent's worker connects to.
type Agents struct {
	CA *pki.CA
	// TemporalAddresses are the frontends of the Temporal cluster: a site
	// agent balances over them all.
	TemporalAddresses []string
	TemporalNamespace string
	// CodecKey is the payload key of a site agent's tenant: a site
	// decrypts its own tenant's payloads only.
	CodecKey func(ctx context.Context, tenant string) ([]byte, error)
	// TemporalTLS says that the frontend speaks mutual TLS: site agents dial
	// it with their certificate and check it under TemporalServerName.
	TemporalTLS        bool
	TemporalServerName string
	// ReservedHosts are the control plane's and Temporal's names and
	// addresses: no site's serving certificate names them.
	ReservedHosts []string
}

type tlsStateKey struct{}

// AgentsHandler serves JoinService and SecretsService for agents. It must
// be served over TLS: join answers carry certificates and, to site agents,
// the codec key.
func (s *Server) AgentsHandler(a Agents) http.Handler {
	opts := s.handlerOptions()
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewJoinServiceHandler(join{s, a}, opts...))
	mux.Handle(bettercomputev1connect.NewSecretsServiceHandler(secrets{s, a}, opts...))
	mux.Handle(bettercomputev1connect.NewAgentCommandsServiceHandler(agentCommands{s, a}, opts...))
	mux.Handle(bettercomputev1connect.NewDiscoveriesServiceHandler(discoveries{s, a}, opts...))
	artifacts{s, a}.register(mux)
	join{s, a}.registerNodeRenew(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			http.Error(w, "the agents' API answers only over TLS", http.StatusForbidden)
			return
		}
		withKinds(mux).ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tlsStateKey{}, r.TLS)))
	})
}

// peer returns the verified role and identity of the calling agent's
// client certificate, if it sent one.
func (a Agents) peer(ctx context.Context) (pki.Role, string, bool) {
	st, ok := ctx.Value(tlsStateKey{}).(*tls.ConnectionState)
	if !ok || len(st.PeerCertificates) == 0 {
		return "", "", false
	}
	role, id, err := a.CA.Verify(st.PeerCertificates[0])
	if err != nil {
		return "", "", false
	}
	return role, id, true
}

// sitePeer is the site of the joined site agent calling, or Unauthenticated
// saying which agent may do what the caller tried.
func (a Agents) sitePeer(ctx context.Context, does string) (string, error) {
	role, site, ok := a.peer(ctx)
	if !ok || role != pki.RoleSite {
		return "", errs.New(errs.Unauthenticated, "only a joined site agent %s (present its client certificate)", does)
	}
	return site, nil
}

type join struct {
	*Server
	a Agents
}

// admission is what a consumed token admits.
type admission struct {
	role            pki.Role
	tenant, site    string
	identity, token string
	ttl             time.Duration
}

func (s join) Join(ctx context.Context, req *connect.Request[v1.JoinRequest]) (*connect.Response[v1.JoinResponse], error) {
	m := req.Msg
	pub, err := pki.ParsePublicKey(m.PublicKeyPem)
	if err != nil {
		return nil, errs.Invalid("publicKeyPem", "not a PKIX public key in PEM: %v", err)
	}
	if err := s.precheckServeHosts(ctx, m); err != nil {
		return nil, err
	}
	var out *v1.JoinResponse
	adm, err := s.admit(ctx, m, func(adm admission) (c store.Certificate, err error) {
		out, c, err = s.certify(ctx, adm, pub, m.PublicKeyPem, m.ServeHosts, false)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "agent joined", "role", adm.role, "identity", adm.identity, "site", adm.site)
	return connect.NewResponse(out), nil
}

// certify issues the admitted agent's certificate for pub (and, to a site
// agent that names serve hosts, its serving certificate, by the serving-name
// rule) and builds the answer: a site agent also gets its Temporal settings
// and the codec key. It returns the certificate's record too, for the
// caller to store: a join in the statement that spends its token, a
// renewal on its own.
func (s join) certify(ctx context.Context, adm admission, pub crypto.PublicKey, pubPEM []byte, serveHosts []string, renewal bool) (*v1.JoinResponse, store.Certificate, error) {
	out := &v1.JoinResponse{CaPem: s.a.CA.CertPEM(), Identity: adm.identity, SiteId: adm.site, TenantId: adm.tenant}
	var err error
	if adm.role == pki.RoleSite {
		out.TemporalAddresses, out.TemporalNamespace = s.a.TemporalAddresses, s.a.TemporalNamespace
		if len(s.a.TemporalAddresses) > 0 { // for site agents from before temporal_addresses
			out.TemporalAddress = s.a.TemporalAddresses[0]
		}
		out.TaskQueue = kinds.SiteTaskQueue(adm.site)
		if s.a.CodecKey == nil {
			return nil, store.Certificate{}, errs.New(errs.Internal, "the agents' listener has no payload keys")
		}
		if out.CodecKey, err = s.a.CodecKey(ctx, adm.tenant); err != nil {
			return nil, store.Certificate{}, err
		}
		out.TemporalTls, out.TemporalServerName = s.a.TemporalTLS, s.a.TemporalServerName
		if out.ServingCertPem, err = s.servingCert(ctx, adm, pub, serveHosts, renewal); err != nil {
			return nil, store.Certificate{}, err
		}
	}
	certPEM, err := s.a.CA.Issue(pub, adm.role, adm.identity, adm.ttl)
	if err != nil {
		return nil, store.Certificate{}, err
	}
	out.CertPem = certPEM
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return nil, store.Certificate{}, err
	}
	return out, store.Certificate{Serial: cert.SerialNumber.Text(16), TenantID: adm.tenant,
		Role: string(adm.role), Identity: adm.identity, SiteID: adm.site, TokenID: adm.token,
		PublicKey: pubPEM, CertPEM: certPEM, ExpiresAt: cert.NotAfter}, nil
}

// admit consumes the token for the role asked and records the certificate
// certify issues for what it admits, in one statement: a token is spent
// only with its certificate on record. A ramdisk or machine token brought
// by a site agent must be for a node of that agent's site; one that is not
// is refused unspent.
func (s join) admit(ctx context.Context, m *v1.JoinRequest, certify func(admission) (store.Certificate, error)) (admission, error) {
	if _, _, err := pki.ParseToken(m.Token); err != nil {
		return admission{}, err
	}
	hash := pki.HashToken(m.Token)
	now := s.now()
	switch pki.Role(m.Role) {
	case pki.RoleSite:
		var adm admission
		_, err := s.store.ConsumeSiteToken(ctx, hash, now, func(t store.SiteToken) (store.Certificate, error) {
			adm = admission{role: pki.RoleSite, tenant: t.TenantID, site: t.SiteID, identity: t.SiteID, token: t.ID, ttl: siteCertTTL}
			return certify(adm)
		})
		return adm, err
	case pki.RoleRamdisk, pki.RoleNode:
		kind, ttl := string(pki.TokenDiscovery), ramdiskCertTTL
		if pki.Role(m.Role) == pki.RoleNode {
			kind, ttl = string(pki.TokenProvisioned), nodeCertTTL
		}
		site := "" // brought by a site's agent: for a node of that site, else not spent
		if role, peerSite, ok := s.a.peer(ctx); ok && role == pki.RoleSite {
			site = peerSite
		}
		var adm admission
		_, err := s.store.ConsumeJoinToken(ctx, hash, kind, site, now, func(t store.JoinToken) (store.Certificate, error) {
			adm = admission{role: pki.Role(m.Role), tenant: t.TenantID, site: t.SiteID, identity: t.NodeID, token: t.ID, ttl: ttl}
			return certify(adm)
		})
		return adm, err
	}
	return admission{}, errs.Invalid("role", "want site, ramdisk or node, got %s", quote(m.Role))
}

type secrets struct {
	*Server
	a Agents
}

// Resolve gives a site agent the secret a node of its site uses, never
// another site's.
func (s secrets) Resolve(ctx context.Context, req *connect.Request[v1.ResolveSecretRequest]) (*connect.Response[v1.ResolveSecretResponse], error) {
	site, err := s.a.sitePeer(ctx, "resolves secrets")
	if err != nil {
		return nil, err
	}
	tenant, id, err := parseSecretRef("ref", req.Msg.Ref)
	if err != nil {
		return nil, err
	}
	used, err := s.store.SecretUsedOnSite(ctx, tenant, req.Msg.Ref, site)
	if err != nil {
		return nil, err
	}
	if !used {
		return nil, errs.New(errs.NotFound, "no node of site %s uses %s", site, req.Msg.Ref)
	}
	b, err := s.store.OpenSecret(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	var values map[string]string
	if err := json.Unmarshal(b, &values); err != nil {
		return nil, errs.New(errs.Internal, "secret %s is not a JSON object", id)
	}
	return connect.NewResponse(&v1.ResolveSecretResponse{Values: values}), nil
}

type agentCommands struct {
	*Server
	a Agents
}

// ReportBMCStatus relays what the calling site says of a node's BMC to the
// workflow whose command waits on it (its BmcStatus search attribute). A
// site speaks only of runs it has commands of.
func (s agentCommands) ReportBMCStatus(ctx context.Context, req *connect.Request[v1.ReportBMCStatusRequest]) (*connect.Response[v1.ReportBMCStatusResponse], error) {
	site, err := s.a.sitePeer(ctx, "reports BMC status")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if m.WorkflowId == "" || m.RunId == "" {
		return nil, errs.Invalid("workflowId", "name the workflow and run")
	}
	if err := s.needTemporal(); err != nil {
		return nil, err
	}
	tenant, err := s.store.SiteRunsWorkflow(ctx, site, m.WorkflowId, m.RunId)
	if err != nil {
		return nil, err
	}
	if tenant == "" {
		return nil, errs.New(errs.NotFound, "site %s has no command of workflow %s run %s", site, m.WorkflowId, m.RunId)
	}
	if err := s.temporal.SignalWorkflow(codec.WithTenant(ctx, tenant), m.WorkflowId, m.RunId, wf.BMCStatusSignal, m.Status); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "relay the BMC status to workflow %s", m.WorkflowId)
	}
	return connect.NewResponse(&v1.ReportBMCStatusResponse{}), nil
}

// ReportAttempt records a retry of one of the calling site's commands.
func (s agentCommands) ReportAttempt(ctx context.Context, req *connect.Request[v1.ReportAttemptRequest]) (*connect.Response[v1.ReportAttemptResponse], error) {
	site, err := s.a.sitePeer(ctx, "reports attempts")
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if m.WorkflowId == "" || m.RunId == "" || m.Step == "" || m.Attempt < 1 {
		return nil, errs.Invalid("step", "name the workflow, run, step and an attempt of 1 or more")
	}
	if err := s.store.RecordAttempt(ctx, site, m.WorkflowId, m.RunId, m.Step, int(m.Attempt)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.ReportAttemptResponse{}), nil
}
