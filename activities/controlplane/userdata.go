package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/activity"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/userdata"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
)

// UserDataTTL is how long a node's site serves its rendered user data and
// its join token admits the installed machine: a deploy streams for hours.
const UserDataTTL = 6 * time.Hour

// RenderUserData renders the node's user data from its profile's template
// (internal/userdata) and, in one transaction, issues the single-use
// provisioned token it uses and publishes the seed behind the node's site:
// the token exists only if the seed that holds it does. It returns where
// the site serves the seed, never the data.
func (a *Activities) RenderUserData(ctx context.Context, in kinds.UserDataInput) (kinds.UserDataOutput, error) {
	out, err := a.renderUserData(ctx, in)
	return out, errs.ToTemporal(err)
}

func (a *Activities) renderUserData(ctx context.Context, in kinds.UserDataInput) (kinds.UserDataOutput, error) {
	name, err := userdata.ParseRef(in.Field, in.Ref, in.Owner)
	if err != nil {
		return kinds.UserDataOutput{}, err
	}
	if a.Artifacts == nil {
		return kinds.UserDataOutput{}, errs.New(errs.Unsupported, "this control plane publishes no per-node files: user data cannot reach the node")
	}
	value, err := a.Store.OpenSecret(ctx, in.Owner, name)
	if errs.Is(err, errs.NotFound) {
		return kinds.UserDataOutput{}, errs.Invalid(in.Field, "secret %s does not exist", in.Ref)
	} else if err != nil {
		return kinds.UserDataOutput{}, err
	}
	tmpl, err := userdata.Template(in.Field, value)
	if err != nil {
		return kinds.UserDataOutput{}, err
	}
	n, err := a.Store.GetNode(ctx, in.TenantID, in.NodeID)
	if err != nil {
		return kinds.UserDataOutput{}, err
	}
	f := userdata.Facts{NodeID: n.ID, SiteID: n.SiteID, TenantID: n.TenantID, MACs: n.MACs}
	node := sdk.Node{ID: n.ID, TenantID: n.TenantID, SiteID: n.SiteID, PoolID: n.PoolID, MACs: n.MACs}
	var out kinds.UserDataOutput
	err = pgx.BeginFunc(ctx, a.Store.Pool(), func(tx pgx.Tx) error {
		var tok sdk.Secret
		if userdata.UsesToken(tmpl) {
			if a.PKI == nil {
				return errs.New(errs.Unsupported, "the user data uses {{joinToken}}, and this control plane has no CA to issue it (better-compute pki init)")
			}
			t, err := a.PKI.IssueJoinToken(ctx, tx, node, sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, TTL: UserDataTTL, MaxUses: 1})
			if err != nil {
				return err
			}
			tok = t.Token
		}
		out, err = a.publishSeed(ctx, tx, node, in.Field, tmpl, f, tok)
		return err
	})
	return out, err
}

// publishSeed renders the seed and publishes it; the instance id is the
// run's, so each deploy runs cloud-init afresh.
func (a *Activities) publishSeed(ctx context.Context, tx pgx.Tx, node sdk.Node, field, tmpl string, f userdata.Facts, tok sdk.Secret) (kinds.UserDataOutput, error) {
	rendered, err := userdata.Render(field, tmpl, f, tok)
	if err != nil {
		return kinds.UserDataOutput{}, err
	}
	instance := f.NodeID
	if activity.IsActivity(ctx) {
		instance += "-" + activity.GetInfo(ctx).WorkflowExecution.RunID
	}
	seed, err := userdata.Seed(rendered, f, instance)
	if err != nil {
		return kinds.UserDataOutput{}, errs.Wrap(errs.Internal, err, "write the cidata seed")
	}
	u, err := a.Artifacts.Publish(ctx, tx, node, userdata.SeedName, seed, UserDataTTL)
	if err != nil {
		return kinds.UserDataOutput{}, err
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return kinds.UserDataOutput{}, errs.Wrap(errs.Internal, err, "the seed's URL")
	}
	sum := sha256.Sum256(seed)
	return kinds.UserDataOutput{Path: parsed.EscapedPath(), SHA256: hex.EncodeToString(sum[:])}, nil
}
