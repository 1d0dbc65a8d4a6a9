package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
)

// codes maps each error kind to its Connect code. This is the only place
// where kinds meet Connect codes.
var codes = map[errs.Kind]connect.Code{
	errs.NotFound:         connect.CodeNotFound,
	errs.InvalidInput:     connect.CodeInvalidArgument,
	errs.InvalidState:     connect.CodeFailedPrecondition,
	errs.Unsupported:      connect.CodeUnimplemented,
	errs.UnverifiedWipe:   connect.CodeFailedPrecondition,
	errs.DriverError:      connect.CodeUnavailable,
	errs.BootStalled:      connect.CodeFailedPrecondition,
	errs.Unauthenticated:  connect.CodeUnauthenticated,
	errs.PermissionDenied: connect.CodePermissionDenied,
	errs.AlreadyExists:    connect.CodeAlreadyExists,
	errs.ForbiddenTarget:  connect.CodePermissionDenied,
	errs.Unavailable:      connect.CodeUnavailable,
	errs.Internal:         connect.CodeInternal,
}

// toConnect turns any error into a Connect error carrying an ErrorDetail.
// Errors that are not ours, and every INTERNAL, are logged with a request id
// and answered as INTERNAL with only that id, so nothing unexpected (a query,
// a secret) reaches the client and the operator can find the cause.
func toConnect(ctx context.Context, log *slog.Logger, procedure string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) && !hasDetail(ce) {
		return withDetail(ce, &v1.ErrorDetail{Kind: string(errs.FromCode(ce.Code().String())), Op: procedure})
	}
	if ce != nil {
		return ce
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		if ctx.Err() != nil {
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		}
		e = errs.Wrap(errs.Internal, err, "internal error")
	}
	if e.Kind == errs.Internal {
		// Logged here, once, whoever made it; the caller gets the id to
		// quote, never the cause (a query, a secret).
		id := requestID()
		log.ErrorContext(ctx, "internal error", "procedure", procedure, "requestId", id, "err", err)
		e = errs.New(errs.Internal, "internal error; the control plane's log has it under requestId %s", id)
	}
	code, ok := codes[e.Kind]
	if !ok {
		code = connect.CodeUnknown
	}
	msg := e.Msg
	if e.Err != nil && e.Kind != errs.Internal {
		msg += ": " + e.Err.Error()
	}
	return withDetail(connect.NewError(code, errors.New(msg)),
		&v1.ErrorDetail{Kind: string(e.Kind), Field: e.Field, Op: procedure})
}

func hasDetail(ce *connect.Error) bool {
	for _, d := range ce.Details() {
		if d.Type() == "bettercompute.v1.ErrorDetail" {
			return true
		}
	}
	return false
}

func withDetail(ce *connect.Error, d *v1.ErrorDetail) *connect.Error {
	if detail, err := connect.NewErrorDetail(d); err == nil {
		ce.AddDetail(detail)
	}
	return ce
}

// errorInterceptor maps every handler error once, at the edge.
func errorInterceptor(log *slog.Logger) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			if err != nil {
				return nil, toConnect(ctx, log, req.Spec().Procedure, err)
			}
			return resp, nil
		}
	}
}

// withKinds adds an ErrorDetail to the Connect JSON errors that Connect
// writes before any interceptor runs (a body that does not decode, an
// unknown field, an oversized body), so every error carries its kind.
func withKinds(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json;") {
			next.ServeHTTP(w, r)
			return
		}
		rec := &errorRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		rec.finish(r.URL.Path)
	})
}

// decodeFieldRE finds the field protojson names in a decode error:
// `invalid value for int64 field ttlSeconds: "x"`, `unknown field "foo"`.
var decodeFieldRE = regexp.MustCompile(`(?:invalid value for \S+ field ([A-Za-z0-9_.]+):|unknown field "([^"]{1,64})")`)

// decodeField returns the field a Connect decode error names, or "".
func decodeField(msg string) string {
	m := decodeFieldRE.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	return m[1] + m[2]
}

// decodeMessageLimit bounds the message of an error Connect wrote itself.
const decodeMessageLimit = 256

// errorRecorder holds back error bodies to add the detail; success
// responses pass straight through.
type errorRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (e *errorRecorder) WriteHeader(code int) {
	e.status = code
	if code < 400 {
		e.ResponseWriter.WriteHeader(code)
	}
}

func (e *errorRecorder) Write(b []byte) (int, error) {
	if e.status == 0 {
		e.WriteHeader(http.StatusOK)
	}
	if e.status < 400 {
		return e.ResponseWriter.Write(b)
	}
	return e.body.Write(b)
}

func (e *errorRecorder) finish(procedure string) {
	if e.status < 400 {
		return
	}
	out := e.body.Bytes()
	var body map[string]any
	if json.Unmarshal(out, &body) == nil && body["details"] == nil {
		// Connect's decode errors quote the input (an unknown field's
		// whole name): keep a short prefix, as the interceptor does.
		if msg, _ := body["message"].(string); len(msg) > decodeMessageLimit {
			body["message"] = clip(msg, decodeMessageLimit) + "…"
		}
		code, _ := body["code"].(string)
		msg, _ := body["message"].(string)
		d := &v1.ErrorDetail{Kind: string(errs.FromCode(code)), Op: procedure, Field: decodeField(msg)}
		raw, _ := proto.Marshal(d)
		body["details"] = []any{map[string]any{"type": "bettercompute.v1.ErrorDetail",
			"value": base64.RawStdEncoding.EncodeToString(raw), "debug": map[string]any{"kind": d.Kind, "op": d.Op, "field": d.Field}}}
		if b, err := json.Marshal(body); err == nil {
			out = b
		}
	}
	e.ResponseWriter.Header().Del("Content-Length")
	e.ResponseWriter.WriteHeader(e.status)
	_, _ = e.ResponseWriter.Write(out)
}

// requestID names one logged failure: "req_" and 16 hex digits.
func requestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "req_" + hex.EncodeToString(b)
}
