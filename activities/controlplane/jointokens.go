package controlplane

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/activity"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// Bounds of a provisioned join token's life: long enough for an installer
// to run, short enough that a lost ISO soon admits nothing.
const (
	DefaultProvisionedTTL = 2 * time.Hour
	MaxProvisionedTTL     = 24 * time.Hour
)

// JoinTokens is the control plane's sdk.PKI: it issues a step's node a
// single-use provisioned token, stored (its hash only) in the step's
// transaction, which admits one bcd node of that node with role node.
type JoinTokens struct {
	Now func() time.Time // time.Now when nil
}

var _ sdk.PKI = JoinTokens{}

// IssueJoinToken issues the token. The plain token is returned only as an
// sdk.Secret, never logged or stored.
func (j JoinTokens) IssueJoinToken(ctx context.Context, tx pgx.Tx, node sdk.Node, req sdk.JoinTokenRequest) (sdk.JoinToken, error) {
	const op = "pki.IssueJoinToken"
	ttl, err := provisionedTTL(req)
	if err != nil {
		return sdk.JoinToken{}, err.WithOp(op)
	}
	site, err2 := store.NodeSiteTx(ctx, tx, node.TenantID, node.ID)
	if err2 != nil {
		return sdk.JoinToken{}, err2
	}
	now := time.Now
	if j.Now != nil {
		now = j.Now
	}
	expires := now().Add(ttl)
	plain, hash := pki.NewToken(pki.TokenProvisioned)
	t := store.JoinToken{ID: ids.New(ids.JoinToken), TenantID: node.TenantID, SiteID: site, NodeID: node.ID,
		Kind: string(pki.TokenProvisioned), WorkflowID: workflowOf(ctx), ExpiresAt: expires}
	if err := store.CreateJoinTokenTx(ctx, tx, t, hash); err != nil {
		return sdk.JoinToken{}, err
	}
	return sdk.JoinToken{Token: sdk.Secret(plain), ExpiresAt: expires}, nil
}

// provisionedTTL checks the request: a provisioned token, single use, a
// TTL within bounds (the default when zero).
func provisionedTTL(req sdk.JoinTokenRequest) (time.Duration, *errs.Error) {
	switch {
	case req.Role != sdk.RoleProvisioned:
		return 0, errs.Invalid("role", "a step issues only %s join tokens, got %q", sdk.RoleProvisioned, req.Role)
	case req.MaxUses != 1:
		return 0, errs.Invalid("maxUses", "a provisioned join token admits one agent once: maxUses must be 1, got %d", req.MaxUses)
	case req.TTL < 0 || req.TTL > MaxProvisionedTTL:
		return 0, errs.Invalid("ttl", "a provisioned join token lives from 1s to %s, got %s", MaxProvisionedTTL, req.TTL)
	case req.TTL == 0:
		return DefaultProvisionedTTL, nil
	}
	return req.TTL, nil
}

// workflowOf is the workflow of the activity ctx belongs to, recorded on
// the token for audit; "" outside an activity.
func workflowOf(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).WorkflowExecution.ID
}
