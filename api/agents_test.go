package api_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/api"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// agentsEnv is the agents' TLS listener over a fresh database.
type agentsEnv struct {
	*env
	ca   *pki.CA
	url  string
	site string
}

func newAgentsEnv(t *testing.T) *agentsEnv {
	t.Helper()
	e := newEnv(t)
	ca, err := pki.Init(t.TempDir(), "test.example")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Config{Store: e.store}).AgentsHandler(
		api.Agents{CA: ca, TemporalAddresses: []string{"127.0.0.1:7233", "127.0.0.1:7243"}, TemporalNamespace: "ns", CodecKey: func(_ context.Context, tenant string) ([]byte, error) { return []byte("key of " + tenant), nil },
			TemporalTLS: true, TemporalServerName: "127.0.0.1", ReservedHosts: reservedHosts}))
	srv.TLS = api.AgentsTLS(ca)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	site, _, err := e.store.CreateSite(context.Background(), store.Site{TenantID: "root", Kind: "shared", Region: "r", LoopbackLab: true})
	if err != nil {
		t.Fatal(err)
	}
	return &agentsEnv{env: e, ca: ca, url: srv.URL, site: site.ID}
}

// client returns an HTTP client trusting the test server, presenting cert
// and key when given.
func (a *agentsEnv) client(t *testing.T, certPEM []byte, key crypto.Signer) *http.Client {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // httptest's own certificate
	if certPEM != nil {
		cert, err := pki.ParseCert(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

func (a *agentsEnv) join(t *testing.T, hc *http.Client, token, role string) (*v1.JoinResponse, crypto.Signer, error) {
	t.Helper()
	key, _, err := pki.NewEd25519Key()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := pki.MarshalPublicKey(key.Public())
	resp, err := bettercomputev1connect.NewJoinServiceClient(hc, a.url).Join(context.Background(),
		connect.NewRequest(&v1.JoinRequest{Token: token, Role: role, PublicKeyPem: pub, ServeHosts: []string{"127.0.0.1"}}))
	if err != nil {
		return nil, key, err
	}
	return resp.Msg, key, nil
}

func kind(err error) string {
	var ce *connect.Error
	if !asConnectErr(err, &ce) {
		return "none"
	}
	for _, d := range ce.Details() {
		if v, e := d.Value(); e == nil {
			if x, ok := v.(*v1.ErrorDetail); ok {
				return x.Kind
			}
		}
	}
	return ce.Code().String()
}

func TestJoinSiteOnceThenReport(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	plain, hash := pki.NewToken(pki.TokenSite)
	if _, _, err := a.store.CreateSiteToken(ctx, store.SiteToken{TenantID: "root", SiteID: a.site, ExpiresAt: time.Now().Add(time.Hour)}, hash); err != nil {
		t.Fatal(err)
	}
	anon := a.client(t, nil, nil)
	resp, key, err := a.join(t, anon, string(plain), "site")
	if err != nil {
		t.Fatalf("Join(site token) = %v", err)
	}
	cert, _ := pki.ParseCert(resp.CertPem)
	if role, id, err := a.ca.Verify(cert); err != nil || role != pki.RoleSite || id != a.site || resp.TaskQueue != "site/"+a.site || len(resp.CodecKey) == 0 || len(resp.ServingCertPem) == 0 {
		t.Errorf("Join(site) = role %s id %s err %v queue %q; want site %s with queue, codec key and serving cert", role, id, err, resp.TaskQueue, a.site)
	}
	if !resp.TemporalTls || resp.TemporalServerName != "127.0.0.1" {
		t.Errorf("Join(site) temporal TLS = %v, %q; want true, 127.0.0.1", resp.TemporalTls, resp.TemporalServerName)
	}
	if got, want := fmt.Sprintf("%s %v", resp.TemporalAddress, resp.TemporalAddresses), "127.0.0.1:7233 [127.0.0.1:7233 127.0.0.1:7243]"; got != want {
		t.Errorf("Join(site) temporal address and addresses = %s, want %s (the old field the first frontend)", got, want)
	}
	if _, _, err := a.join(t, anon, string(plain), "site"); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("Join with a used site token = %v, want UNAUTHENTICATED", err)
	}
	if _, _, err := a.join(t, anon, "bcsite_garbage", "site"); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("Join with a malformed token = %v, want UNAUTHENTICATED", err)
	}

	// The site's agent records an attempt of one of its site's commands;
	// without a certificate, nothing.
	if err := a.store.StartCommand(ctx, store.Command{ID: ids.New(ids.Command), TenantID: "root", NodeID: "node_x", SiteID: a.site,
		Kind: "power.setPower", RunsOn: "site", WorkflowID: "wf", RunID: "run", Step: "01.power.setPower"}); err != nil {
		t.Fatal(err)
	}
	report := func(hc *http.Client) error {
		_, err := bettercomputev1connect.NewAgentCommandsServiceClient(hc, a.url).ReportAttempt(ctx,
			connect.NewRequest(&v1.ReportAttemptRequest{WorkflowId: "wf", RunId: "run", Step: "01.power.setPower", Attempt: 3}))
		return err
	}
	if err := report(anon); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("ReportAttempt without a certificate = %v, want UNAUTHENTICATED", err)
	}
	if err := report(a.client(t, resp.CertPem, key)); err != nil {
		t.Fatalf("ReportAttempt = %v", err)
	}
	cmds, err := a.store.ListCommands(ctx, "root", "node_x")
	if err != nil || len(cmds) != 1 || cmds[0].Attempt != 3 {
		t.Errorf("commands after ReportAttempt(3) = %+v, %v; want attempt 3", cmds, err)
	}
	if _, err := a.store.FinishCommand(ctx, "wf", "run", "01.power.setPower", store.CommandSucceeded, 1, "", ""); err != nil {
		t.Fatal(err)
	}
	if cmds, _ := a.store.ListCommands(ctx, "root", "node_x"); cmds[0].Attempt != 3 || cmds[0].Status != "succeeded" {
		t.Errorf("FinishCommand lowered the attempt: %+v", cmds[0])
	}
}

func TestJoinRamdiskWithDiscoveryToken(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	plain, hash := pki.NewToken(pki.TokenDiscovery)
	node := ids.New(ids.Node)
	if err := a.store.CreateJoinToken(ctx, store.JoinToken{ID: ids.New(ids.JoinToken), TenantID: "root", SiteID: a.site,
		NodeID: node, Kind: string(pki.TokenDiscovery), ExpiresAt: time.Now().Add(time.Hour)}, hash); err != nil {
		t.Fatal(err)
	}
	anon := a.client(t, nil, nil)
	if _, _, err := a.join(t, anon, string(plain), "site"); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("a discovery token used as a site token = %v, want UNAUTHENTICATED", err)
	}
	resp, _, err := a.join(t, anon, string(plain), "ramdisk")
	if err != nil {
		t.Fatalf("Join(ramdisk) = %v", err)
	}
	cert, _ := pki.ParseCert(resp.CertPem)
	if role, id, _ := a.ca.Verify(cert); role != pki.RoleRamdisk || id != node || len(resp.CodecKey) != 0 || resp.TemporalAddress != "" || resp.TemporalTls {
		t.Errorf("Join(ramdisk) = %s %s with codec key %d bytes, want ramdisk %s and no site secrets", role, id, len(resp.CodecKey), node)
	}
	if _, _, err := a.join(t, anon, string(plain), "ramdisk"); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("Join with the used discovery token = %v, want UNAUTHENTICATED", err)
	}
	if revoked, _ := a.store.CertificateRevoked(ctx, cert.SerialNumber.Text(16)); revoked {
		t.Errorf("the issued certificate is not recorded")
	}
	if n, _ := a.store.RevokeIdentity(ctx, "root", node); n != 1 {
		t.Errorf("RevokeIdentity = %d, want 1", n)
	}
	if revoked, _ := a.store.CertificateRevoked(ctx, cert.SerialNumber.Text(16)); !revoked {
		t.Errorf("the certificate is not revoked after RevokeIdentity")
	}
}

// TestJoinThroughAnotherSiteKeepsTheToken: a ramdisk's discovery token
// brought by another site's agent (a machine cabled to the wrong rack) is
// refused, and the token is not spent: the machine still joins through
// its own site.
func TestJoinThroughAnotherSiteKeepsTheToken(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	siteB, _, err := a.store.CreateSite(ctx, store.Site{TenantID: "root", Kind: "shared", Region: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	plain, hash := pki.NewToken(pki.TokenDiscovery)
	if err := a.store.CreateJoinToken(ctx, store.JoinToken{ID: ids.New(ids.JoinToken), TenantID: "root", SiteID: a.site,
		NodeID: ids.New(ids.Node), Kind: string(pki.TokenDiscovery), ExpiresAt: time.Now().Add(time.Hour)}, hash); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.join(t, a.siteClient(t, siteB.ID), string(plain), "ramdisk"); kind(err) != "UNAUTHENTICATED" ||
		!strings.Contains(err.Error(), "another site") {
		t.Errorf("Join(ramdisk) through site %s = %v, want UNAUTHENTICATED: the token is for a node of another site", siteB.ID, err)
	}
	if _, _, err := a.join(t, a.siteClient(t, a.site), string(plain), "ramdisk"); err != nil {
		t.Errorf("Join(ramdisk) through its own site after the refusal = %v, want it admitted (the token unspent)", err)
	}
}

func TestSecretsOnlyForTheSitesNodes(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	secret, err := a.store.CreateSecret(ctx, "root", []byte(`{"username":"admin","password":"pw"}`))
	if err != nil {
		t.Fatal(err)
	}
	ref := "secret://root/" + secret
	pool, err := a.store.CreatePool(ctx, store.Pool{TenantID: "root", SiteID: a.site, Class: "c", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "root", SiteID: a.site, PoolID: pool.ID,
		BMCAddress: "10.0.0.1", BMCDriver: "redfish", BMCCredentialsRef: ref}); err != nil {
		t.Fatal(err)
	}
	other, _, _ := a.store.CreateSite(ctx, store.Site{TenantID: "root", Kind: "shared", Region: "r2"})
	certFor := func(site string) *http.Client {
		key, _, _ := pki.NewEd25519Key()
		pem, err := a.ca.Issue(key.Public(), pki.RoleSite, site, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return a.client(t, pem, key)
	}
	resolve := func(hc *http.Client) (map[string]string, error) {
		r, err := bettercomputev1connect.NewSecretsServiceClient(hc, a.url).Resolve(ctx, connect.NewRequest(&v1.ResolveSecretRequest{Ref: ref}))
		if err != nil {
			return nil, err
		}
		return r.Msg.Values, nil
	}
	if v, err := resolve(certFor(a.site)); err != nil || v["password"] != "pw" {
		t.Errorf("Resolve by the node's site = %v, %v; want the password", v, err)
	}
	if _, err := resolve(certFor(other.ID)); kind(err) != "NOT_FOUND" {
		t.Errorf("Resolve by another site = %v, want NOT_FOUND", err)
	}
	if _, err := resolve(a.client(t, nil, nil)); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("Resolve without a certificate = %v, want UNAUTHENTICATED", err)
	}
	// A node of another tenant that names root's secret does not open it.
	if err := a.store.CreateTenant(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	siteB, _, err := a.store.CreateSite(ctx, store.Site{TenantID: "b", Kind: "dedicated", Region: "r"})
	if err != nil {
		t.Fatal(err)
	}
	poolB, err := a.store.CreatePool(ctx, store.Pool{TenantID: "b", SiteID: siteB.ID, Class: "c", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "b", SiteID: siteB.ID, PoolID: poolB.ID,
		BMCAddress: "10.0.0.2", BMCDriver: "redfish", BMCCredentialsRef: ref}); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(certFor(siteB.ID)); kind(err) != "NOT_FOUND" {
		t.Errorf("Resolve of root's secret by tenant b's site = %v, want NOT_FOUND", err)
	}
}

// recordedSiteCert issues a site certificate of ttl for the env's site,
// records it as a join would, and returns it with its key.
func (a *agentsEnv) recordedSiteCert(t *testing.T, ttl time.Duration) ([]byte, crypto.Signer) {
	t.Helper()
	key, _, err := pki.NewEd25519Key()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := a.ca.Issue(key.Public(), pki.RoleSite, a.site, ttl)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := pki.ParseCert(certPEM)
	pub, _ := pki.MarshalPublicKey(key.Public())
	if err := a.store.RecordCertificate(context.Background(), store.Certificate{Serial: cert.SerialNumber.Text(16), TenantID: "root",
		Role: "site", Identity: a.site, SiteID: a.site, TokenID: "sitetok_test", PublicKey: pub, CertPEM: certPEM, ExpiresAt: cert.NotAfter}); err != nil {
		t.Fatal(err)
	}
	return certPEM, key
}

func (a *agentsEnv) renew(hc *http.Client, hosts ...string) (*v1.JoinResponse, error) {
	resp, err := bettercomputev1connect.NewJoinServiceClient(hc, a.url).Renew(context.Background(),
		connect.NewRequest(&v1.RenewRequest{ServeHosts: hosts}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func TestRenewSiteCertificate(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	oldPEM, key := a.recordedSiteCert(t, time.Hour)
	old, _ := pki.ParseCert(oldPEM)
	resp, err := a.renew(a.client(t, oldPEM, key), "127.0.0.1")
	if err != nil {
		t.Fatalf("Renew(site cert) = %v", err)
	}
	cert, err := pki.ParseCert(resp.CertPem)
	if err != nil {
		t.Fatalf("Renew() cert = %v", err)
	}
	role, id, err := a.ca.Verify(cert)
	if err != nil || role != pki.RoleSite || id != a.site {
		t.Errorf("Renew() cert = %s %s %v, want site %s", role, id, err, a.site)
	}
	if !pki.PublicKeyOf(cert).(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
		t.Errorf("Renew() certified another key, want the caller's")
	}
	if !cert.NotAfter.After(old.NotAfter) || cert.SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Errorf("Renew() NotAfter = %v serial %v, want after %v and a new serial", cert.NotAfter, cert.SerialNumber, old.NotAfter)
	}
	if resp.TaskQueue != "site/"+a.site || len(resp.CodecKey) == 0 || !resp.TemporalTls || len(resp.ServingCertPem) == 0 || resp.TenantId != "root" {
		t.Errorf("Renew() = queue %q codec %d bytes tls %v serving %d bytes tenant %q; want a site join's answer",
			resp.TaskQueue, len(resp.CodecKey), resp.TemporalTls, len(resp.ServingCertPem), resp.TenantId)
	}
	if serving, err := pki.ParseCert(resp.ServingCertPem); err != nil || serving.VerifyHostname("127.0.0.1") != nil {
		t.Errorf("Renew() serving cert = %v; want one for 127.0.0.1", err)
	}
	// The renewed certificate renews in turn, without serve hosts no
	// serving certificate, and a revocation of the site revokes both.
	again, err := a.renew(a.client(t, resp.CertPem, key))
	if err != nil || len(again.ServingCertPem) != 0 {
		t.Fatalf("Renew(renewed cert) = %v; want a certificate and no serving certificate", err)
	}
	if n, _ := a.store.RevokeIdentity(ctx, "root", a.site); n != 3 {
		t.Errorf("RevokeIdentity after two renewals = %d, want 3", n)
	}
	if _, err := a.renew(a.client(t, resp.CertPem, key)); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("Renew(revoked cert) = %v, want UNAUTHENTICATED", err)
	}
}

func TestRenewRefused(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	revokedPEM, revokedKey := a.recordedSiteCert(t, time.Hour)
	if _, err := a.store.RevokeIdentity(ctx, "root", a.site); err != nil {
		t.Fatal(err)
	}
	unknownKey, _, _ := pki.NewEd25519Key()
	unknownPEM, _ := a.ca.Issue(unknownKey.Public(), pki.RoleSite, a.site, time.Hour)
	tests := []struct {
		name string
		hc   *http.Client
		want string
	}{
		{"no certificate", a.client(t, nil, nil), "UNAUTHENTICATED"},
		{"revoked", a.client(t, revokedPEM, revokedKey), "UNAUTHENTICATED"},
		{"never recorded", a.client(t, unknownPEM, unknownKey), "UNAUTHENTICATED"},
	}
	for _, tt := range tests {
		if _, err := a.renew(tt.hc, "127.0.0.1"); kind(err) != tt.want {
			t.Errorf("Renew(%s) = %v, want %s", tt.name, err, tt.want)
		}
	}
}
