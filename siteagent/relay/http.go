package relay

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
)

// Body limits.
const (
	maxJoinBody     = 64 << 10
	maxProgressBody = 64 << 10
	maxResultBody   = 16 << 20
)

// DefaultWait is a long poll's wait when ?wait is absent.
const DefaultWait = 25 * time.Second

// Handler serves the ramdisk endpoints:
//
//	POST /v1/join                    a ramdisk's or bcd node's join, proxied (protojson JoinRequest → JoinResponse)
//	GET  /v1/commands/next?wait=25s  the node's next kinds.Command; 204 when none
//	POST /v1/commands/{id}/progress  a kinds.Progress
//	POST /v1/commands/{id}/result    a kinds.Result
//	POST /v1/renew                   a bcd node's renewal, proxied (→ protojson JoinResponse)
//
// The commands need a verified client certificate of role ramdisk, a
// renewal one of role node. Errors are JSON {"kind": …, "error": …}.
func (r *Relay) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/join", r.serveJoin)
	mux.HandleFunc("POST /v1/renew", r.serveRenew)
	mux.HandleFunc("GET /v1/commands/next", r.withNode(r.serveNext))
	mux.HandleFunc("POST /v1/commands/{id}/progress", r.withNode(r.serveProgress))
	mux.HandleFunc("POST /v1/commands/{id}/result", r.withNode(r.serveResult))
	return mux
}

// withNode admits only ramdisks with a verified certificate for node_….
func (r *Relay) withNode(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if req.TLS == nil {
			writeError(w, errs.New(errs.Unauthenticated, "the relay speaks only TLS with a ramdisk certificate"))
			return
		}
		role, id, err := pki.PeerIdentity(*req.TLS, r.cfg.TrustDomain)
		if err != nil {
			writeError(w, err)
			return
		}
		if role != pki.RoleRamdisk || !strings.HasPrefix(id, "node_") {
			writeError(w, errs.New(errs.PermissionDenied, "only a ramdisk's node certificate may take commands, not %s/%s", role, id))
			return
		}
		r.hear(id)
		if r.cfg.Seen != nil {
			r.cfg.Seen(id)
		}
		h(w, req, id)
	}
}

func (r *Relay) serveNext(w http.ResponseWriter, req *http.Request, node string) {
	wait := DefaultWait
	if s := req.URL.Query().Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			writeError(w, errs.Invalid("wait", "wait must be a duration such as 25s"))
			return
		}
		wait = d
	}
	wait = min(wait, r.cfg.MaxWait)
	cmd, sc, ok := r.take(req.Context(), node, req.TLS.PeerCertificates[0].SerialNumber.String(), wait)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// The ramdisk's own span of the command (if it traces) is a child of
	// the hand-out's.
	tracing.Inject(trace.ContextWithSpanContext(req.Context(), sc), w.Header())
	writeJSON(w, http.StatusOK, cmd)
}

func (r *Relay) serveProgress(w http.ResponseWriter, req *http.Request, node string) {
	var p kinds.Progress
	if err := readJSON(w, req, maxProgressBody, &p); err != nil {
		writeError(w, err)
		return
	}
	if err := r.Progress(node, req.PathValue("id"), p); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *Relay) serveResult(w http.ResponseWriter, req *http.Request, node string) {
	var res kinds.Result
	if err := readJSON(w, req, maxResultBody, &res); err != nil {
		writeError(w, err)
		return
	}
	if err := r.Result(node, req.PathValue("id"), res); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *Relay) serveJoin(w http.ResponseWriter, req *http.Request) {
	if r.cfg.Join == nil {
		writeError(w, errs.New(errs.Unsupported, "this relay does not proxy joins"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxJoinBody))
	if err != nil {
		writeError(w, errs.Invalid("body", "cannot read the join request (at most %d bytes)", maxJoinBody))
		return
	}
	var jr v1.JoinRequest
	if err := protojson.Unmarshal(body, &jr); err != nil {
		writeError(w, errs.Invalid("body", "the join request is not a JSON JoinRequest"))
		return
	}
	if jr.GetRole() == "" {
		jr.Role = string(pki.RoleRamdisk)
	}
	if jr.GetRole() != string(pki.RoleRamdisk) && jr.GetRole() != string(pki.RoleNode) {
		writeError(w, errs.Invalid("role", "the relay proxies only ramdisk and node (bcd node) joins, not %q", jr.GetRole()))
		return
	}
	jr.ServeHosts = nil
	resp, err := r.cfg.Join(req.Context(), &jr)
	if err != nil {
		r.log.Warn("ramdisk join refused", "err", err)
		if r.cfg.JoinRefused != nil && errs.KindOf(err) != errs.Unavailable && jr.GetRole() == string(pki.RoleRamdisk) {
			r.cfg.JoinRefused(jr.GetToken(), err)
		}
		writeError(w, err)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		writeError(w, errs.Wrap(errs.Internal, err, "cannot encode the join response"))
		return
	}
	msg := "ramdisk joined"
	if jr.GetRole() == string(pki.RoleNode) {
		msg = "installed machine's bcd node joined"
	}
	r.log.Info(msg, "node", resp.GetIdentity())
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func readJSON(w http.ResponseWriter, req *http.Request, limit int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, limit))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errs.Invalid("body", "the body is larger than %d bytes", limit)
		}
		return errs.Invalid("body", "the body is not valid JSON: %v", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// statusOf maps a kind to the HTTP status the ramdisk sees.
func statusOf(k errs.Kind) int {
	switch k {
	case errs.InvalidInput:
		return http.StatusBadRequest
	case errs.NotFound:
		return http.StatusNotFound
	case errs.Unauthenticated:
		return http.StatusUnauthorized
	case errs.PermissionDenied:
		return http.StatusForbidden
	case errs.AlreadyExists, errs.InvalidState:
		return http.StatusConflict
	case errs.Unsupported:
		return http.StatusNotImplemented
	case errs.Unavailable:
		return http.StatusServiceUnavailable
	case errs.DriverError:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, err error) {
	k := errs.KindOf(err)
	status := statusOf(k)
	msg := err.Error()
	var e *errs.Error
	if !errors.As(err, &e) {
		msg = "internal error; see the site agent's log"
	}
	writeJSON(w, status, map[string]string{"kind": string(k), "error": msg})
}
