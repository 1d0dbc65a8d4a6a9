package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	bettercomputev1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
)

// TenantHeader carries the tenant a request acts in, next to tenantId in the body.
const TenantHeader = "Better-Compute-Tenant"

// maxResponse bounds what the CLI reads from one answer.
const maxResponse = 64 << 20

// Client calls the API with the Connect protocol over JSON: every method is
// POST <BaseURL>/<procedure> with the protojson body.
type Client struct {
	BaseURL string
	// Token returns the bearer token; it is asked for only when a call is made,
	// so local mistakes are reported before a missing credential.
	Token  func() (string, error)
	Tenant string // sent as the TenantHeader when not empty
	HTTP   *http.Client
}

// Call sends req to procedure (e.g. /bettercompute.v1.SitesService/Create) and
// returns the raw JSON answer. A non-2xx answer becomes an *errs.Error with the
// kind, field and op from the ErrorDetail, or a kind derived from the code.
func (c *Client) Call(ctx context.Context, procedure string, req proto.Message) ([]byte, error) {
	body, err := protojson.Marshal(req)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "encode %s request", procedure)
	}
	return c.CallJSON(ctx, procedure, body)
}

// CallJSON is Call with a body that is already protojson.
func (c *Client) CallJSON(ctx context.Context, procedure string, body []byte) ([]byte, error) {
	token, err := c.Token()
	if err != nil {
		return nil, err
	}
	url := strings.TrimRight(c.BaseURL, "/") + procedure
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, errs.Invalid("url", "bad API URL %q: %v", c.BaseURL, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Connect-Protocol-Version", "1")
	hreq.Header.Set("User-Agent", "better-compute-cli")
	hreq.Header.Set("Authorization", "Bearer "+token)
	if c.Tenant != "" {
		hreq.Header.Set(TenantHeader, c.Tenant)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err,
			"cannot reach the control plane at %s; is `better-compute serve` running? (set --url or BETTER_COMPUTE_URL)", c.BaseURL)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "read the answer to %s", procedure)
	}
	if resp.StatusCode/100 != 2 {
		return nil, decodeError(procedure, resp.StatusCode, raw)
	}
	return raw, nil
}

// wireError is the Connect protocol's JSON error body.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"details"`
}

func decodeError(procedure string, status int, raw []byte) *errs.Error {
	var w wireError
	if err := json.Unmarshal(raw, &w); err != nil || w.Code == "" {
		msg := strings.TrimSpace(string(raw))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		return errs.New(kindOfStatus(status), "%s answered HTTP %d: %s", procedure, status, msg)
	}
	e := &errs.Error{Kind: errs.FromCode(w.Code), Msg: w.Message}
	for _, d := range w.Details {
		if d.Type != "bettercompute.v1.ErrorDetail" {
			continue
		}
		var detail bettercomputev1.ErrorDetail
		b, err := decodeBase64(d.Value)
		if err != nil || proto.Unmarshal(b, &detail) != nil {
			continue
		}
		if detail.GetKind() != "" {
			e.Kind = errs.Kind(detail.GetKind())
		}
		e.Field, e.Op = detail.GetField(), detail.GetOp()
	}
	if e.Msg == "" {
		e.Msg = fmt.Sprintf("%s failed with %s", procedure, w.Code)
	}
	return e
}

// decodeBase64 accepts the padded and the unpadded standard encodings: Connect
// writes the latter and reads both.
func decodeBase64(s string) ([]byte, error) {
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}

// kindOfStatus maps an HTTP status to a kind for answers that are not Connect
// errors (a proxy, or a server that does not know the procedure).
func kindOfStatus(status int) errs.Kind {
	switch status {
	case http.StatusUnauthorized:
		return errs.Unauthenticated
	case http.StatusForbidden:
		return errs.PermissionDenied
	case http.StatusNotFound:
		return errs.Unsupported
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return errs.Unavailable
	}
	return errs.Internal
}
