package relay

import (
	"encoding/pem"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// serveRenew forwards an installed machine's renewal: the handshake proved
// that the caller holds the key of its node certificate, which the control
// plane renews if it is a node of this site, unrevoked.
func (r *Relay) serveRenew(w http.ResponseWriter, req *http.Request) {
	if r.cfg.Renew == nil {
		writeError(w, errs.New(errs.Unsupported, "this relay does not forward renewals"))
		return
	}
	if req.TLS == nil {
		writeError(w, errs.New(errs.Unauthenticated, "a renewal needs the node's certificate over mutual TLS"))
		return
	}
	role, id, err := pki.PeerIdentity(*req.TLS, r.cfg.TrustDomain)
	if err != nil {
		writeError(w, err)
		return
	}
	if role != pki.RoleNode {
		writeError(w, errs.New(errs.PermissionDenied, "only an installed machine's node certificate is renewed here, not %s/%s", role, id))
		return
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: req.TLS.PeerCertificates[0].Raw})
	resp, err := r.cfg.Renew(req.Context(), certPEM)
	if err != nil {
		r.log.Warn("node renewal refused", "node", id, "err", err)
		writeError(w, err)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		writeError(w, errs.Wrap(errs.Internal, err, "cannot encode the renewal"))
		return
	}
	r.log.Info("installed machine's bcd node renewed", "node", id)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}
