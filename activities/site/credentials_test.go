package site

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
)

const trustDomain = "site.example.test"

// secrets is a SecretsService that answers only verified site agents.
type secrets struct {
	ca       *pki.CA
	calls    atomic.Int32
	password atomic.Pointer[string] // secret://bmc/r1's, the BMC's (s3cret) when nil
}

func (s *secrets) Resolve(_ context.Context, req *connect.Request[v1.ResolveSecretRequest]) (*connect.Response[v1.ResolveSecretResponse], error) {
	s.calls.Add(1)
	switch req.Msg.GetRef() {
	case "secret://bmc/r1":
		pw := "s3cret"
		if p := s.password.Load(); p != nil {
			pw = *p
		}
		return connect.NewResponse(&v1.ResolveSecretResponse{Values: map[string]string{"username": "admin", "password": pw}}), nil
	case "secret://denied":
		ce := connect.NewError(connect.CodePermissionDenied, errs.New(errs.PermissionDenied, "not this site's secret"))
		if d, err := connect.NewErrorDetail(&v1.ErrorDetail{Kind: string(errs.PermissionDenied)}); err == nil {
			ce.AddDetail(d)
		}
		return nil, ce
	}
	return nil, connect.NewError(connect.CodeNotFound, errs.New(errs.NotFound, "no such secret"))
}

// startSecrets serves SecretsService over mTLS with a pki-issued certificate
// and returns a SecretsClient presenting a site agent's certificate.
func startSecrets(t *testing.T) (*SecretsClient, *secrets) {
	t.Helper()
	ca, err := pki.Init(t.TempDir(), trustDomain)
	if err != nil {
		t.Fatal(err)
	}
	svc := &secrets{ca: ca}
	mux := http.NewServeMux()
	path, h := bettercomputev1connect.NewSecretsServiceHandler(svc)
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if role, _, err := pki.PeerIdentity(*r.TLS, trustDomain); err != nil || role != pki.RoleSite {
			http.Error(w, "site agents only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewUnstartedServer(mux)
	skey, skeyPEM, _ := pki.NewKey()
	scert, err := ca.IssueServer(skey.Public(), pki.RoleControlPlane, "cp-1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if srv.TLS, err = ca.ServerTLS(scert, skeyPEM, pki.Want{Roles: []pki.Role{pki.RoleSite}}); err != nil {
		t.Fatal(err)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	key, keyPEM, _ := pki.NewKey()
	cert, err := ca.Issue(key.Public(), pki.RoleSite, "site_1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := pki.ClientTLS(ca.Pool(), cert, keyPEM, "127.0.0.1", ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleControlPlane}})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	t.Cleanup(hc.CloseIdleConnections)
	return NewSecretsClient(hc, srv.URL), svc
}

func TestSecretCredentials(t *testing.T) {
	b := startBMC(t)
	sc, svc := startSecrets(t)
	a := &Activities{Drivers: map[string]DriverFactory{bmc.DriverRedfish: redfishFactory}, Secrets: sc}
	env := testEnv(t, a)
	target := kinds.BMCTarget{NodeID: "node_1", Address: b.SystemURL(), Driver: "redfish"}

	target.CredentialsRef = "secret://bmc/r1"
	if _, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOn}); err != nil {
		t.Fatalf("power.setPower with secret:// = %v", err)
	}
	if got := b.State().Power; got != bmc.On {
		t.Errorf("BMC power = %s, want on", got)
	}
	tests := []struct {
		ref  string
		want errs.Kind
	}{
		{"secret://missing", errs.NotFound},
		{"secret://denied", errs.PermissionDenied},
	}
	for _, tt := range tests {
		target.CredentialsRef = tt.ref
		_, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: bmc.PowerOff})
		if typ, _ := appError(t, err); typ != string(tt.want) {
			t.Errorf("power.setPower(%s) = %s, want %s", tt.ref, typ, tt.want)
		}
	}
	if got := svc.calls.Load(); got != 3 {
		t.Errorf("SecretsService calls = %d, want 3", got)
	}
}

// TestSecretsKeptForTTL: the site agent asks the control plane for a secret
// once for the commands of the next SecretTTL, again after it, and again at
// once after the BMC refused the values kept.
func TestSecretsKeptForTTL(t *testing.T) {
	b := startBMC(t)
	sc, svc := startSecrets(t)
	clock := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	sc.kept.Now = func() time.Time { return clock }
	a := &Activities{Drivers: map[string]DriverFactory{bmc.DriverRedfish: redfishFactory}, Secrets: sc}
	env := testEnv(t, a)
	target := kinds.BMCTarget{NodeID: "node_1", Address: b.SystemURL(), Driver: "redfish", CredentialsRef: "secret://bmc/r1"}
	power := func(action bmc.PowerAction) error {
		_, err := env.ExecuteActivity(kinds.PowerSetPower, kinds.SetPowerInput{BMC: target, Action: action})
		return err
	}
	calls := func(step string, want int32) {
		t.Helper()
		if got := svc.calls.Load(); got != want {
			t.Errorf("%s: SecretsService calls = %d, want %d", step, got, want)
		}
	}
	for _, action := range []bmc.PowerAction{bmc.PowerOn, bmc.PowerOff} {
		if err := power(action); err != nil {
			t.Fatalf("power.setPower(%s) = %v", action, err)
		}
	}
	calls("two commands at once", 1)

	clock = clock.Add(SecretTTL)
	if err := power(bmc.PowerOn); err != nil {
		t.Fatal(err)
	}
	calls("a command SecretTTL later", 2)

	wrong := "not-the-bmc-password"
	svc.password.Store(&wrong)
	clock = clock.Add(SecretTTL)
	if typ, _ := appError(t, power(bmc.PowerOff)); typ != string(errs.Unauthenticated) {
		t.Fatalf("power.setPower with a password the BMC refuses = %s, want %s", typ, errs.Unauthenticated)
	}
	calls("the secret changed, SecretTTL later", 3)
	svc.password.Store(nil) // the operator mends the secret and retries at once
	if err := power(bmc.PowerOff); err != nil {
		t.Fatalf("power.setPower after the secret was mended = %v, want the new values asked for", err)
	}
	calls("after the BMC refused the kept values", 4)
}
