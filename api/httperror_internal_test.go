package api

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

// TestWriteHTTPErrorHidesInternalCauses: the agents' plain-HTTP endpoints
// (artifacts, forwarded renewals) answer an INTERNAL error as Connect
// does: a request id, the cause only in the log; other kinds keep their
// message and status.
func TestWriteHTTPErrorHidesInternalCauses(t *testing.T) {
	var log bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&log, nil))}
	cause := errors.New(`pq: SELECT bytes FROM artifacts WHERE secret = 'hunter2'`)
	for _, tt := range []struct {
		name   string
		err    error
		status int
		says   string
	}{
		{"internal", errs.Wrap(errs.Internal, cause, "store.SiteArtifact"), 500, "requestId req_"},
		{"not ours", cause, 500, "requestId req_"},
		{"not found", errs.New(errs.NotFound, "no artifact %q", "x"), 404, `no artifact \"x\"`},
	} {
		w := httptest.NewRecorder()
		s.writeHTTPError(w, httptest.NewRequest("GET", "/v1/artifacts/x", nil), tt.err)
		body := w.Body.String()
		if w.Code != tt.status || !strings.Contains(body, tt.says) || strings.Contains(body, "hunter2") {
			t.Errorf("writeHTTPError(%s) = %d %s, want %d saying %q and nothing of the cause", tt.name, w.Code, body, tt.status, tt.says)
		}
	}
	if !strings.Contains(log.String(), "hunter2") {
		t.Errorf("log = %q, want the internal causes in it", log.String())
	}
}
