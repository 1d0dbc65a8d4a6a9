// Package api serves the control plane's Connect API (HTTP/1.1 JSON and h2c
// gRPC): authentication and tenant scoping, input validation, the mapping of
// error kinds to Connect codes, and the handlers of every service. Handlers
// validate first and write nothing on bad input.
package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/store"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Config is what the API needs.
type Config struct {
	Store    *store.Store
	Temporal client.Client // nil: workflow methods answer UNAVAILABLE
	// DataConverter decodes what activities report (their heartbeats) for
	// `commands list` and `metal get`; nil: no progress is shown.
	DataConverter converter.DataConverter
	Namespace     string
	Hardware      config.HardwareProfiles
	Logger        *slog.Logger
	Now           func() time.Time // nil: time.Now
	// Interceptors wrap every service outside the error mapping and the
	// token check, so they see the code the caller gets (metrics).
	Interceptors []connect.Interceptor
	// Steps are the API's own steps (the built-ins and its plugins), which
	// profiles are resolved against beside those the workers publish;
	// nil: the built-ins (steps.Registry()).
	Steps *sdk.Registry
}

// Server implements the Connect services.
type Server struct {
	store     *store.Store
	temporal  client.Client
	dc        converter.DataConverter
	namespace string
	hardware  config.HardwareProfiles
	log       *slog.Logger
	now       func() time.Time
	outer     []connect.Interceptor
	steps     *sdk.Registry
}

// New returns the API server.
func New(cfg Config) *Server {
	s := &Server{store: cfg.Store, temporal: cfg.Temporal, dc: cfg.DataConverter, namespace: cfg.Namespace,
		hardware: cfg.Hardware, log: cfg.Logger, now: cfg.Now, outer: cfg.Interceptors}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.steps = cfg.Steps; s.steps == nil {
		s.steps = builtins
	}
	return s
}

// builtins is the built-in steps' registry (steps' tests show it
// registers).
var builtins = must(steps.Registry())

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Handler returns the HTTP handler serving every service, /healthz, and gRPC
// reflection and health (without a token).
func (s *Server) Handler() http.Handler {
	opts := append([]connect.HandlerOption{connect.WithInterceptors(s.outer...)}, s.handlerOptions(authInterceptor(s.store))...)
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewTenantsServiceHandler(tenants{s}, opts...))
	mux.Handle(bettercomputev1connect.NewSitesServiceHandler(sites{s}, opts...))
	mux.Handle(bettercomputev1connect.NewSiteTokensServiceHandler(siteTokens{s}, opts...))
	mux.Handle(bettercomputev1connect.NewPoolsServiceHandler(pools{s}, opts...))
	mux.Handle(bettercomputev1connect.NewImagesServiceHandler(images{s}, opts...))
	mux.Handle(bettercomputev1connect.NewProfilesServiceHandler(profiles{s}, opts...))
	mux.Handle(bettercomputev1connect.NewHardwareProfilesServiceHandler(hardwareProfiles{s}, opts...))
	mux.Handle(bettercomputev1connect.NewWorkflowsServiceHandler(workflows{s}, opts...))
	mux.Handle(bettercomputev1connect.NewMetalServiceHandler(metal{s}, opts...))
	mux.Handle(bettercomputev1connect.NewCommandsServiceHandler(commands{s}, opts...))
	mux.Handle(bettercomputev1connect.NewTenantSecretsServiceHandler(tenantSecrets{s}, opts...))
	mux.HandleFunc("GET /healthz", s.health)
	s.mountDiscovery(mux)
	return withKinds(mux)
}

// CompressMinBytes is the smallest response the API compresses for a
// client that accepts gzip: below it, gzip costs more CPU than the bytes it
// saves take to send (the verbs' and the agents' answers are a few hundred
// bytes; compressing them was 1.3% of the control plane's CPU in the fleet
// benchmark), while a long list still travels compressed.
const CompressMinBytes = 4 << 10

// handlerOptions are every service's options: the strict JSON codec, the
// body limit, compression of large responses only, the error mapping and
// the input check before the interceptors given (so a malformed request
// never reaches the token lookup or a handler).
func (s *Server) handlerOptions(interceptors ...connect.Interceptor) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(strictJSON{"json"}),
		connect.WithCodec(strictJSON{"json; charset=utf-8"}),
		connect.WithReadMaxBytes(MaxBodyBytes),
		connect.WithCompressMinBytes(CompressMinBytes),
		connect.WithInterceptors(append([]connect.Interceptor{errorInterceptor(s.log), inputInterceptor()}, interceptors...)...),
	}
}

// needTemporal is UNAVAILABLE when this process has no Temporal client.
func (s *Server) needTemporal() error {
	if s.temporal == nil {
		return errs.New(errs.Unavailable, "this process is not connected to Temporal")
	}
	return nil
}

// health answers 200 when Postgres and Temporal answer, 503 otherwise.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	out := map[string]string{"status": "ok", "postgres": "ok", "temporal": "ok"}
	code := http.StatusOK
	if err := s.store.Pool().Ping(ctx); err != nil {
		out["postgres"], out["status"], code = err.Error(), "unavailable", http.StatusServiceUnavailable
	}
	if s.temporal == nil {
		out["temporal"] = "not connected"
	} else if _, err := s.temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		out["temporal"], out["status"], code = err.Error(), "unavailable", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(out)
}

// strictJSON is Connect's JSON codec without its leniency: unknown fields are
// an error, so a misspelt field never silently does nothing.
type strictJSON struct{ name string }

func (c strictJSON) Name() string { return c.name }

func (strictJSON) Marshal(m any) ([]byte, error) {
	return protojson.Marshal(m.(proto.Message))
}

func (strictJSON) Unmarshal(b []byte, m any) error {
	msg := m.(proto.Message)
	if len(b) == 0 {
		proto.Reset(msg)
		return nil
	}
	return protojson.UnmarshalOptions{DiscardUnknown: false}.Unmarshal(b, msg)
}
