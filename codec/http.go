package codec

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/errs"
)

// HTTPHandler returns the remote codec endpoint for the Temporal Web UI: POST
// <prefix>/encode and <prefix>/decode with a JSON body {"payloads": […]}, as
// converter.NewPayloadCodecHTTPHandler serves them. Mount it under a prefix
// (for example http.StripPrefix is not needed: the handler matches on the path
// suffix) and give the prefix URL to the UI as its codec endpoint.
//
// The UI calls it from the operator's browser, so it is cross-origin: the
// handler answers CORS preflights and allows the origins in uiOrigins (for
// example "http://127.0.0.1:8233"). With no origins it sets no CORS headers
// and browsers on other origins are refused. It never allows any origin ("*"
// is ignored): the endpoint decrypts.
func HTTPHandler(key []byte, uiOrigins ...string) http.Handler {
	c, err := New(key)
	if err != nil {
		panic(err)
	}
	return c.HTTPHandler(uiOrigins...)
}

// HTTPHandler is the remote codec endpoint (see the function HTTPHandler)
// decoding with every key of c's ring: the control plane's, all tenants'.
func (c *Codec) HTTPHandler(uiOrigins ...string) http.Handler {
	origins := make([]string, 0, len(uiOrigins))
	for _, o := range uiOrigins {
		o = strings.TrimRight(o, "/")
		if o != "" && o != "*" {
			origins = append(origins, o)
		}
	}
	return &corsHandler{origins: origins, next: converter.NewPayloadCodecHTTPHandler(c)}
}

type corsHandler struct {
	origins []string
	next    http.Handler
}

func (h *corsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	allowed := origin != "" && slices.Contains(h.origins, origin)
	if allowed {
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", origin)
		hd.Set("Access-Control-Allow-Credentials", "true")
		hd.Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions {
		if !allowed {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		hd := w.Header()
		hd.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		hd.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization, Authorization-Extras")
		hd.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.next.ServeHTTP(w, r)
}

// Caller is who asks the codec endpoint, as the Web UI's session says.
type Caller struct {
	Tenant     string // the session's tenant
	AllTenants bool   // an operator: every tenant's payloads
	MayEncode  bool   // encode makes payloads the workers trust: write access only
}

// Authorize returns the caller of r, or an error whose kind says the status:
// UNAUTHENTICATED (401), PERMISSION_DENIED (403).
type Authorize func(r *http.Request) (Caller, error)

// PayloadTenant names the tenant whose key encrypted p, or "" when the key is
// no single tenant's. It is the one place the endpoint learns a payload's
// tenant: per-tenant keys map the key id in p's metadata to their tenant.
type PayloadTenant func(p *commonpb.Payload) string

// KeyTenants is a PayloadTenant that reads MetadataKeyID: tenants maps each
// key id to the tenant that owns the key. The key id is bound to the
// ciphertext, so a relabelled payload does not decode.
func KeyTenants(tenants map[string]string) PayloadTenant {
	return func(p *commonpb.Payload) string { return tenants[string(p.GetMetadata()[MetadataKeyID])] }
}

// maxCodecBody bounds a codec request: a page of history's payloads.
const maxCodecBody = 16 << 20

// Guard admits to next (an HTTPHandler) only callers auth names, and only
// payloads they may see: an operator decodes every tenant's, a tenant only
// those tenantOf gives it (an encrypted payload of no known tenant is an
// operator's only); encode needs Caller.MayEncode. CORS preflights go to next
// unchecked: they carry no credential and decode nothing.
func Guard(next http.Handler, auth Authorize, tenantOf PayloadTenant) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		c, err := auth(r)
		if err == nil {
			err = c.mayUse(r, tenantOf)
		}
		if err != nil {
			guardError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// mayUse checks an encode's right and, for a tenant, every encrypted
// payload's tenant; it puts the body it read back for next.
func (c Caller) mayUse(r *http.Request, tenantOf PayloadTenant) error {
	if strings.HasSuffix(r.URL.Path, "/encode") && !c.MayEncode {
		return errs.New(errs.PermissionDenied, "encoding payloads is a write action: only the root tenant, with serve --ui-write-actions")
	}
	if c.AllTenants || !strings.HasSuffix(r.URL.Path, "/decode") {
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxCodecBody))
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "cannot read the codec request")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var ps commonpb.Payloads
	if err := protojson.Unmarshal(body, &ps); err != nil {
		return errs.Wrap(errs.InvalidInput, err, "the codec request is not {\"payloads\": […]}")
	}
	for i, p := range ps.GetPayloads() {
		if string(p.GetMetadata()[MetadataEncoding]) != EncodingEncrypted {
			continue // plain already: decoding reveals nothing
		}
		if tenantOf == nil || tenantOf(p) != c.Tenant {
			return errs.New(errs.PermissionDenied, "payload %d is not tenant %s's: a tenant decodes only its own payloads", i, c.Tenant)
		}
	}
	return nil
}

// guardError answers a refusal with its kind and message; any other error
// (a database down) says only that, the cause stays in the caller's log.
func guardError(w http.ResponseWriter, err error) {
	status := map[errs.Kind]int{errs.Unauthenticated: http.StatusUnauthorized,
		errs.PermissionDenied: http.StatusForbidden, errs.InvalidInput: http.StatusBadRequest}[errs.KindOf(err)]
	if status == 0 {
		http.Error(w, "the codec endpoint cannot check the caller now; retry", http.StatusServiceUnavailable)
		return
	}
	http.Error(w, err.Error(), status)
}
