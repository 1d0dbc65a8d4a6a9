package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/errs"
)

// TestInternalIsLoggedWithRequestID: every INTERNAL, ours or not, is logged
// with a request id that the client's message carries, and its cause reaches
// only the log.
func TestInternalIsLoggedWithRequestID(t *testing.T) {
	for _, err := range []error{
		errors.New("pq: secret query text"),
		errs.Wrap(errs.Internal, errors.New("secret query text"), "the database refused the query"),
	} {
		var log bytes.Buffer
		got := toConnect(context.Background(), slog.New(slog.NewTextHandler(&log, nil)), "/x/Y", err)
		var ce *connect.Error
		if !errors.As(got, &ce) || ce.Code() != connect.CodeInternal {
			t.Fatalf("toConnect(%v) = %v, want INTERNAL", err, got)
		}
		id := regexp.MustCompile(`req_[0-9a-f]{16}`).FindString(ce.Message())
		if id == "" || strings.Contains(ce.Message(), "secret") {
			t.Errorf("toConnect(%v).Message() = %q, want a request id and no cause", err, ce.Message())
		}
		if !strings.Contains(log.String(), "requestId="+id) || !strings.Contains(log.String(), "secret query text") {
			t.Errorf("log = %q, want requestId=%s and the cause", log.String(), id)
		}
	}
}
