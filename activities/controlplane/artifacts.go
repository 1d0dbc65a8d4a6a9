package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// Bounds of a published artifact's life.
const (
	DefaultArtifactTTL = 2 * time.Hour
	MaxArtifactTTL     = 24 * time.Hour
)

// ArtifactPath is where a site's boot listener serves an artifact:
// ArtifactPath + <id>/<name>.
const ArtifactPath = "/artifacts/"

// artifactName is a file name a BMC and an installer take as is.
var artifactName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ArtifactStore is the control plane's sdk.Artifacts: a step's per-node file
// is stored in PostgreSQL in the step's transaction and served by the node's
// site agent (which fetches it from the control plane over its mTLS client
// and checks its digest) at an unguessable URL until it expires.
type ArtifactStore struct {
	Now func() time.Time // time.Now when nil
}

var _ sdk.Artifacts = ArtifactStore{}

// Publish stores data for node and returns the URL of its site's boot
// listener that serves it.
func (p ArtifactStore) Publish(ctx context.Context, tx pgx.Tx, node sdk.Node, name string, data []byte, ttl time.Duration) (string, error) {
	const op = "artifacts.Publish"
	switch {
	case !artifactName.MatchString(name):
		return "", errs.Invalid("name", "an artifact's name is 1 to 100 letters, digits, dots, dashes or underscores, not starting with a dot or dash, got %q", name).WithOp(op)
	case len(data) == 0 || len(data) > store.MaxArtifactBytes:
		return "", errs.Invalid("data", "an artifact holds 1 to %d bytes, got %d", store.MaxArtifactBytes, len(data)).WithOp(op)
	case ttl < 0 || ttl > MaxArtifactTTL:
		return "", errs.Invalid("ttl", "an artifact is served from 1s to %s, got %s", MaxArtifactTTL, ttl).WithOp(op)
	case ttl == 0:
		ttl = DefaultArtifactTTL
	}
	site, err := store.NodeSiteTx(ctx, tx, node.TenantID, node.ID)
	if err != nil {
		return "", err
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	sum := sha256.Sum256(data)
	a := store.Artifact{ID: store.NewArtifactID(), TenantID: node.TenantID, SiteID: site, NodeID: node.ID,
		Name: name, SHA256: hex.EncodeToString(sum[:]), ExpiresAt: now().Add(ttl)}
	base, err := store.PublishArtifactTx(ctx, tx, a, data, now())
	if err != nil {
		return "", err
	}
	return base + ArtifactPath + a.ID + "/" + url.PathEscape(name), nil
}
