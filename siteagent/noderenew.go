package siteagent

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/siteagent/relay"
)

// nodeRenewPath is the control plane's endpoint for renewals a site
// forwards (api.NodeRenewPath).
const nodeRenewPath = "/v1/nodes/renew"

// renewProxy forwards an installed machine's renewal to the control plane
// over the agent's mTLS client: the control plane renews only a node of
// this site.
func renewProxy(hc *http.Client, baseURL string) relay.RenewFunc {
	return func(ctx context.Context, certPEM []byte) (*v1.JoinResponse, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+nodeRenewPath, bytes.NewReader(certPEM))
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "cannot build the renewal request")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "cannot reach the control plane")
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, answerError(resp)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "cannot read the control plane's renewal")
		}
		var out v1.JoinResponse
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &out); err != nil {
			return nil, errs.Wrap(errs.DriverError, err, "the control plane's renewal is not a JoinResponse")
		}
		return &out, nil
	}
}
