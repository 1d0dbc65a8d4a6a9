package api

import (
	"io"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// NodeRenewPath is where a site agent forwards the renewal of one of its
// nodes' bcd node, which reached only the site's relay: POST the node's
// certificate (PEM; the relay checked over mTLS that the node holds its
// key), answered with a protojson JoinResponse.
const NodeRenewPath = "/v1/nodes/renew"

func (s join) registerNodeRenew(mux *http.ServeMux) {
	mux.HandleFunc("POST "+NodeRenewPath, s.forwardedRenew)
}

func (s join) forwardedRenew(w http.ResponseWriter, r *http.Request) {
	site, err := s.a.sitePeer(r.Context(), "forwards node renewals")
	if err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		s.writeHTTPError(w, r, errs.Invalid("body", "the body is the node's certificate in PEM (at most 64 KiB)"))
		return
	}
	cert, err := pki.ParseCert(b)
	if err != nil {
		s.writeHTTPError(w, r, errs.Invalid("body", "the body is not a certificate in PEM"))
		return
	}
	out, err := s.renew(r.Context(), cert, nil, site)
	if err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	body, err := protojson.Marshal(out)
	if err != nil {
		s.writeHTTPError(w, r, errs.Wrap(errs.Internal, err, "cannot encode the renewal"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
