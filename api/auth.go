package api

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// RootTenant is the tenant that exists from the first start; its tokens may
// act in every tenant.
const RootTenant = "root"

// TenantHeader names the tenant a call acts in when its body does not.
const TenantHeader = "Better-Compute-Tenant"

// TokenLookup resolves a token's hash to the tenant it belongs to.
type TokenLookup interface {
	LookupAPIToken(ctx context.Context, hash []byte) (tenantID, tokenID string, err error)
	TenantExists(ctx context.Context, id string) (bool, error)
}

type principal struct {
	tenant  string // the token's tenant
	tokenID string
	header  string // the tenant named by the header, if any
}

type principalKey struct{}

// authInterceptor admits calls carrying a known bearer token. Health checks
// are served outside Connect and need none.
func authInterceptor(tokens TokenLookup) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			raw, ok := strings.CutPrefix(req.Header().Get("Authorization"), "Bearer ")
			if !ok || raw == "" {
				return nil, errs.New(errs.Unauthenticated,
					"no API token: send 'Authorization: Bearer <token>' (the CLI reads BETTER_COMPUTE_TOKEN or <data-dir>/root-token)")
			}
			tenant, tokenID, err := tokens.LookupAPIToken(ctx, pki.HashToken(strings.TrimSpace(raw)))
			if errs.Is(err, errs.NotFound) {
				return nil, errs.New(errs.Unauthenticated, "the API token is not known or was revoked")
			}
			if err != nil {
				return nil, err
			}
			p := principal{tenant: tenant, tokenID: tokenID, header: req.Header().Get(TenantHeader)}
			return next(context.WithValue(ctx, principalKey{}, p), req)
		}
	}
}

// tenantOf decides the tenant a call acts in: the request's tenantId, else the
// header, else the token's own tenant. A token of another tenant than root
// sees no tenant but its own: any other answers NOT_FOUND, as an unknown one.
func (s *Server) tenantOf(ctx context.Context, requested string) (string, error) {
	p, ok := ctx.Value(principalKey{}).(principal)
	if !ok {
		return "", errs.New(errs.Unauthenticated, "no API token")
	}
	t := requested
	if t == "" {
		t = p.header
	}
	if t == "" {
		t = p.tenant
	}
	if t == p.tenant {
		return t, nil
	}
	if p.tenant != RootTenant {
		return "", notFoundTenant(t)
	}
	exists, err := s.store.TenantExists(ctx, t)
	if err != nil {
		return "", err
	}
	if !exists {
		return "", notFoundTenant(t)
	}
	return t, nil
}

func notFoundTenant(t string) error {
	return &errs.Error{Kind: errs.NotFound, Field: "tenantId", Msg: fmt.Sprintf("tenant %s not found", quote(t))}
}
