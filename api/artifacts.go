package api

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// Headers of an artifact fetched by its site.
const (
	ArtifactSHA256Header  = "X-Bc-Artifact-Sha256"
	ArtifactNameHeader    = "X-Bc-Artifact-Name"
	ArtifactExpiresHeader = "X-Bc-Artifact-Expires"
)

// ArtifactsBase is where a site agent says where it serves artifacts:
// PUT {"url": "http://host:port"} (its boot listener).
const ArtifactsBase = "/v1/artifacts/base"

// artifacts serves, on the agents' listener and to joined site agents
// only, the per-node files steps published (sdk.Artifacts): a site fetches
// its own site's unexpired ones by id, and says where it serves them.
// Plain HTTP rather than an RPC: the body is the file, up to 64 MiB.
type artifacts struct {
	*Server
	a Agents
}

func (s artifacts) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/artifacts/{id}", s.fetch)
	mux.HandleFunc("PUT "+ArtifactsBase, s.setBase)
}

// fetch answers the artifact with its digest, name and expiry in headers.
// Unknown, another site's and expired ids are alike NOT_FOUND.
func (s artifacts) fetch(w http.ResponseWriter, r *http.Request) {
	site, err := s.a.sitePeer(r.Context(), "fetches artifacts")
	if err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if !store.ValidArtifactID(id) {
		s.writeHTTPError(w, r, errs.New(errs.NotFound, "no artifact %q", id))
		return
	}
	a, data, err := s.store.SiteArtifact(r.Context(), site, id, s.now())
	if err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	h := w.Header()
	h.Set(ArtifactSHA256Header, a.SHA256)
	h.Set(ArtifactNameHeader, a.Name)
	h.Set(ArtifactExpiresHeader, a.ExpiresAt.UTC().Format(time.RFC3339Nano))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// setBase records where the calling site's agent serves artifacts: plain
// HTTP on one of the names the site declared at its join, so no step's URL
// points anywhere else.
func (s artifacts) setBase(w http.ResponseWriter, r *http.Request) {
	site, err := s.a.sitePeer(r.Context(), "says where it serves artifacts")
	if err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	var in struct {
		URL string `json:"url"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&in); err != nil {
		s.writeHTTPError(w, r, errs.Invalid("url", "the body is JSON {\"url\": \"http://host:port\"}"))
		return
	}
	hosts, err := s.store.SiteServeHosts(r.Context(), site)
	if err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	base, err := artifactsBase(in.URL, hosts)
	if err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	if err := s.store.SetArtifactsURL(r.Context(), site, base); err != nil {
		s.writeHTTPError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// artifactsBase checks a site's boot listener URL: http://host:port with a
// host the site declared.
func artifactsBase(raw string, declared []string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Port() == "" {
		return "", errs.Invalid("url", "want the boot listener's http://host:port, got %q", raw)
	}
	host, err := pki.CanonicalHost(u.Hostname())
	if err != nil || !slices.Contains(declared, host) {
		return "", errs.Invalid("url", "%q is not one of the names the site declared at its join (%v)", u.Hostname(), declared)
	}
	return "http://" + net.JoinHostPort(host, u.Port()), nil
}

// writeHTTPError answers err as JSON {"kind", "error"} with its status. The
// message is the one a Connect caller gets (toConnect): an INTERNAL error
// is logged with a request id and answered with only that id, never its
// cause (a query, a secret).
func (s *Server) writeHTTPError(w http.ResponseWriter, r *http.Request, err error) {
	kind := errs.KindOf(err)
	status := http.StatusInternalServerError
	switch kind {
	case errs.NotFound:
		status = http.StatusNotFound
	case errs.InvalidInput:
		status = http.StatusBadRequest
	case errs.Unauthenticated:
		status = http.StatusUnauthorized
	case errs.PermissionDenied:
		status = http.StatusForbidden
	case errs.InvalidState:
		status = http.StatusConflict
	case errs.Unavailable:
		status = http.StatusServiceUnavailable
	}
	var msg string
	var ce *connect.Error
	if errors.As(toConnect(r.Context(), s.log, r.Method+" "+r.URL.Path, err), &ce) {
		msg = ce.Message()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"kind": string(kind), "error": msg})
}
