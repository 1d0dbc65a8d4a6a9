package codec

import (
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
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
