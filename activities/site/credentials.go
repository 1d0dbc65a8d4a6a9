package site

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/kept"
	"github.com/better-compute/better-compute/kinds"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// credentials resolves a BMC credentials reference. Neither the values nor
// the variable's content ever reach an error message or a log.
func (a *Activities) credentials(ctx context.Context, ref string) (bmc.Credentials, error) {
	scheme, rest, ok := strings.Cut(ref, "://")
	if !ok || rest == "" {
		return bmc.Credentials{}, errs.Invalid("bmc.credentialsRef",
			"a credentials reference looks like env://NAME, secret://… or vault://…")
	}
	switch scheme {
	case "env":
		return a.envCredentials(rest)
	case "secret":
		return a.secretCredentials(ctx, ref)
	case "vault":
		return bmc.Credentials{}, errs.New(errs.Unsupported,
			"vault:// credentials are not supported by this site agent yet; use secret:// or env://")
	}
	return bmc.Credentials{}, errs.Invalid("bmc.credentialsRef",
		"unknown credentials scheme %q: use env://, secret:// or vault://", scheme)
}

func (a *Activities) envCredentials(name string) (bmc.Credentials, error) {
	if a.LookupEnv == nil {
		return bmc.Credentials{}, errs.New(errs.Unsupported, "this site agent does not read env:// credentials")
	}
	if !a.envAllowed(name) {
		// Checked before the lookup: the answer says nothing of the variable.
		return bmc.Credentials{}, errs.Invalid("bmc.credentialsRef",
			"env://%s is not allowed on this site: the site agent reads only %s<NAME> variables and those named by 'bcd site --allow-env NAME'",
			name, kinds.EnvSecretPrefix)
	}
	v, ok := a.LookupEnv(name)
	if !ok || v == "" {
		return bmc.Credentials{}, errs.New(errs.NotFound,
			"environment variable %s is not set in the site agent; set it to username:password and restart the agent", name)
	}
	user, pass, ok := strings.Cut(v, ":")
	if !ok || user == "" {
		return bmc.Credentials{}, errs.Invalid("bmc.credentialsRef",
			"environment variable %s must hold username:password", name)
	}
	return bmc.Credentials{Username: user, Password: pass}, nil
}

// envAllowed reports whether env://name may be read: a variable with the
// fixed prefix, or one the operator listed, never the rest of the agent's
// environment (PATH, its tokens).
func (a *Activities) envAllowed(name string) bool {
	if !envName.MatchString(name) {
		return false
	}
	return (strings.HasPrefix(name, kinds.EnvSecretPrefix) && name != kinds.EnvSecretPrefix) || slices.Contains(a.AllowEnv, name)
}

func (a *Activities) secretCredentials(ctx context.Context, ref string) (bmc.Credentials, error) {
	if a.Secrets == nil {
		return bmc.Credentials{}, errs.New(errs.Unsupported,
			"this site agent has no connection to the control plane's SecretsService for secret:// credentials")
	}
	vals, err := a.Secrets.Resolve(ctx, ref)
	if err != nil {
		return bmc.Credentials{}, err
	}
	if vals["username"] == "" {
		return bmc.Credentials{}, errs.Invalid("bmc.credentialsRef",
			"secret %s has no \"username\" value; store username and password in it", ref)
	}
	return bmc.Credentials{Username: vals["username"], Password: vals["password"]}, nil
}

// SecretsClient resolves secret:// references with the control plane's
// SecretsService; httpClient must present the site agent's certificate.
//
// It keeps what it resolved for SecretTTL: a workflow sends its BMC
// commands back to back (set the boot device, then the power), and each
// asked the control plane again, a round trip to a control plane that may
// be a WAN away. The answer depends only on the reference, which names its
// tenant, and on the site, which is this process's. A secret changed or
// withdrawn from the site reaches the site's commands within SecretTTL, and
// at once after a BMC refused the credentials (Forget).
type SecretsClient struct {
	c    bettercomputev1connect.SecretsServiceClient
	kept kept.Map[string, map[string]string]
}

// SecretTTL is how long a SecretsClient keeps a resolved secret.
const SecretTTL = 10 * time.Second

// NewSecretsClient returns a client of the SecretsService at baseURL.
func NewSecretsClient(httpClient *http.Client, baseURL string) *SecretsClient {
	return &SecretsClient{c: bettercomputev1connect.NewSecretsServiceClient(httpClient, baseURL),
		kept: kept.Map[string, map[string]string]{TTL: SecretTTL}}
}

// Resolve returns the values of the secret ref: the ones kept, when
// resolved less than SecretTTL ago. Refusals are not kept.
func (s *SecretsClient) Resolve(ctx context.Context, ref string) (map[string]string, error) {
	if values, ok := s.kept.Get(ref); ok {
		return maps.Clone(values), nil
	}
	at := s.kept.Clock()
	resp, err := s.c.Resolve(ctx, connect.NewRequest(&v1.ResolveSecretRequest{Ref: ref}))
	if err != nil {
		return nil, FromConnect("secrets.resolve", err)
	}
	values := resp.Msg.GetValues()
	s.kept.Put(ref, maps.Clone(values), at)
	return values, nil
}

// Forget drops what is kept of ref, so the next Resolve asks again.
func (s *SecretsClient) Forget(ref string) { s.kept.Forget(ref) }

// forgetRefused drops the kept values of ref after its BMC refused them
// (err UNAUTHENTICATED): the operator who fixes the secret retries with
// the new values, not the kept ones.
func (a *Activities) forgetRefused(ref string, err error) {
	if a.Secrets != nil && errs.KindOf(err) == errs.Unauthenticated {
		a.Secrets.Forget(ref)
	}
}

// FromConnect turns an error from a control-plane Connect call into an
// errs.Error: the kind from the ErrorDetail the API attaches, else from the
// code; network failures are UNAVAILABLE.
func FromConnect(op string, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return errs.Wrap(errs.Unavailable, err, "cannot reach the control plane").WithOp(op)
	}
	for _, d := range ce.Details() {
		if m, derr := d.Value(); derr == nil {
			if ed, ok := m.(*v1.ErrorDetail); ok && ed.GetKind() != "" {
				return &errs.Error{Kind: errs.Kind(ed.GetKind()), Op: op, Field: ed.GetField(), Msg: ce.Message()}
			}
		}
	}
	return &errs.Error{Kind: errs.FromCode(ce.Code().String()), Op: op, Msg: ce.Message()}
}
