// Package webui owns the Temporal Web UI as `serve` shows it: the UI server's
// handler built without its own listener (so it links none of the Temporal
// server and can be tested alone), and the gate in front of it — the
// control plane's login (an API token exchanged for a session cookie), the
// Host and Origin checks that refuse DNS rebinding, read-only unless asked,
// and the payload codec endpoint behind the same session.
package webui

import (
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/temporalio/ui-server/v2/server/api"
	"github.com/temporalio/ui-server/v2/server/auth"
	"github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/cors"
	"github.com/temporalio/ui-server/v2/server/csrf"
	"github.com/temporalio/ui-server/v2/server/headers"
	"github.com/temporalio/ui-server/v2/server/route"
	"github.com/temporalio/ui-server/v2/ui"

	"github.com/better-compute/better-compute/errs"
)

// UIHandler is the Temporal UI server's handler for cfg, routed as
// ui-server's own server.NewServer routes it, but returned instead of
// listened with: NewServer's Start binds by itself and exits the process when
// it cannot. cfg.Auth must be off (the gate is the login).
func UIHandler(cfg *config.Config) (http.Handler, error) {
	if cfg.Auth.Enabled {
		return nil, errs.New(errs.Unsupported, "the UI server's own OIDC login is not used: serve's login fronts the UI")
	}
	provider, err := config.NewConfigProviderWithRefresh(cfg)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "the Web UI's configuration is not valid")
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(middleware.Recover(), middleware.Gzip())
	e.Use(cors.CORSMiddleware(cors.CORSConfig{
		AllowHeaders: []string{echo.HeaderOrigin, echo.HeaderContentType, echo.HeaderAccept,
			echo.HeaderXCSRFToken, echo.HeaderAuthorization, auth.AuthorizationExtrasHeader, "Caller-Type"},
		AllowCredentials: true,
		ConfigProvider:   provider,
	}))
	e.Use(middleware.Secure())
	secure := !cfg.CORS.CookieInsecure
	e.Use(csrf.EnsureTokenCookie(secure), middleware.CSRFWithConfig(csrf.MiddlewareConfig(provider, secure)))
	e.Pre(route.PublicPath(cfg.PublicPath))
	route.SetHealthRoute(e)
	forward := []api.Middleware{headers.WithForwardHeaders([]string{auth.AuthorizationExtrasHeader, "Caller-Type"})}
	if err := route.SetAPIRoutes(e, provider, forward); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "the Web UI cannot reach Temporal at %s", cfg.TemporalGRPCAddress)
	}
	if cfg.EnableUI {
		assets, err := ui.Assets()
		if err == nil {
			assets, err = fs.Sub(assets, "local")
		}
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "the Web UI's embedded assets are missing")
		}
		if err := route.SetUIRoutes(e, cfg.PublicPath, assets, provider); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "cannot route the Web UI's pages")
		}
		route.SetRenderRoute(e, "/")
	}
	return e, nil
}
