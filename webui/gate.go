package webui

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
)

// Paths the gate serves itself, beside the UI's own.
const (
	LoginPath  = "/better-compute/login"
	LogoutPath = "/better-compute/logout"
	// CodecPath is the payload codec endpoint on the UI's own origin: the UI
	// calls it with the session cookie, whatever name it is reached by.
	CodecPath = "/better-compute/codec"
)

// DefaultSessionTTL is how long a login lasts.
const DefaultSessionTTL = 12 * time.Hour

// Tokens resolves API tokens: a login's, and a session's on each request (a
// revoked token ends its sessions).
type Tokens interface {
	LookupAPIToken(ctx context.Context, hash []byte) (tenantID, tokenID string, err error)
	APITokenTenant(ctx context.Context, tokenID string) (tenantID string, err error)
}

// Config is what the gate needs.
type Config struct {
	Tokens Tokens
	// Key signs sessions (SessionKey of a secret every serve process shares).
	Key []byte
	// Listen is the UI's listen address; its host is a name the UI answers
	// to, beside localhost, 127.0.0.1 and ::1.
	Listen string
	// Hosts are further names the UI answers to (serve --ui-host).
	Hosts []string
	// RootTenant may see the UI and, with WriteActions, act in it. No other
	// tenant can be granted operator access yet.
	RootTenant   string
	WriteActions bool
	// Codec, when set, is served at CodecPath behind the session;
	// PayloadTenant tells it whose each payload is.
	Codec         http.Handler
	PayloadTenant codec.PayloadTenant
	SessionTTL    time.Duration // 0: DefaultSessionTTL
	Logger        *slog.Logger
}

// Gate fronts the Web UI with the control plane's login.
type Gate struct {
	cfg   Config
	hosts map[string]bool
	codec http.Handler
}

// New checks cfg and returns its gate.
func New(cfg Config) (*Gate, error) {
	if len(cfg.Key) < 32 {
		return nil, errs.Invalid("key", "the session key must be at least 32 bytes, got %d", len(cfg.Key))
	}
	if cfg.Tokens == nil || cfg.RootTenant == "" {
		return nil, errs.New(errs.InvalidInput, "the Web UI's gate needs the token store and the root tenant")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &Gate{cfg: cfg, hosts: map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}}
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil && h != "" && !net.ParseIP(h).IsUnspecified() {
		g.hosts[normalHost(h)] = true
	}
	for _, h := range cfg.Hosts {
		if h = normalHost(h); h == "" || strings.ContainsAny(h, "/:@ ") && net.ParseIP(h) == nil {
			return nil, errs.Invalid("ui-host", "want a host name or IP address, got %q", h)
		}
		g.hosts[normalHost(h)] = true
	}
	if cfg.Codec != nil {
		g.codec = http.StripPrefix(CodecPath, codec.Guard(cfg.Codec, g.CodecCaller, cfg.PayloadTenant))
	}
	return g, nil
}

// Wrap returns ui behind the gate: Host and Origin checked first (a foreign
// Host is 421, a foreign Origin 403: DNS rebinding and cross-site pages end
// there), then the login and codec paths, then the session (none: 401, or a
// redirect to the login page for a browser's page load), the operator check
// (403) and the read-only rule (403).
func (g *Gate) Wrap(ui http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			http.Error(w, "this Web UI does not answer to host "+quote(r.Host)+": reach it by a configured name (serve --ui-host NAME)", http.StatusMisdirectedRequest)
			return
		}
		if !g.originAllowed(r.Header.Get("Origin")) {
			http.Error(w, "requests from origin "+quote(r.Header.Get("Origin"))+" are refused", http.StatusForbidden)
			return
		}
		switch {
		case r.URL.Path == LoginPath:
			g.login(w, r)
		case r.URL.Path == LogoutPath:
			g.logout(w, r)
		case g.codec != nil && strings.HasPrefix(r.URL.Path, CodecPath+"/"):
			g.codec.ServeHTTP(w, r)
		default:
			g.serveUI(w, r, ui)
		}
	})
}

func (g *Gate) serveUI(w http.ResponseWriter, r *http.Request, ui http.Handler) {
	s, err := g.session(r)
	if err != nil {
		g.refuse(w, r, err)
		return
	}
	if !g.operator(s.tenant) {
		http.Error(w, "tenant "+quote(s.tenant)+" may not see the Web UI: it shows every tenant's workflows; log in with an API token of tenant "+g.cfg.RootTenant, http.StatusForbidden)
		return
	}
	if !isRead(r) && !g.mayWrite(s.tenant) {
		http.Error(w, "the Web UI is read-only: write actions need serve --ui-write-actions and a session of tenant "+g.cfg.RootTenant, http.StatusForbidden)
		return
	}
	ui.ServeHTTP(w, r)
}

// operator says whether tenant may see the UI, which shows every tenant's
// workflows. Only the root tenant: no grant of operator access exists yet.
func (g *Gate) operator(tenant string) bool { return tenant == g.cfg.RootTenant }

func (g *Gate) mayWrite(tenant string) bool {
	return g.cfg.WriteActions && tenant == g.cfg.RootTenant
}

// CodecCaller is the codec endpoint's codec.Authorize: the session's tenant;
// an operator sees every tenant's payloads; encoding is a write action.
func (g *Gate) CodecCaller(r *http.Request) (codec.Caller, error) {
	s, err := g.session(r)
	if err != nil {
		if !errs.Is(err, errs.Unauthenticated) {
			g.cfg.Logger.Error("web UI session check failed", "err", err)
		}
		return codec.Caller{}, err
	}
	return codec.Caller{Tenant: s.tenant, AllTenants: g.operator(s.tenant), MayEncode: g.mayWrite(s.tenant)}, nil
}

// session is r's valid session whose token is still live.
func (g *Gate) session(r *http.Request) (session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return session{}, errs.New(errs.Unauthenticated, "no Web UI session: log in at %s with an API token", LoginPath)
	}
	s, err := parseSession(g.cfg.Key, c.Value, time.Now())
	if err != nil {
		return session{}, err
	}
	tenant, err := g.cfg.Tokens.APITokenTenant(r.Context(), s.tokenID)
	if errs.Is(err, errs.NotFound) || err == nil && tenant != s.tenant {
		return session{}, errs.New(errs.Unauthenticated, "the API token of this Web UI session was revoked: log in again")
	}
	return s, err
}

// refuse answers a request without a valid session: a browser loading a page
// goes to the login page, anything else gets 401.
func (g *Gate) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if !errs.Is(err, errs.Unauthenticated) {
		g.cfg.Logger.Error("web UI session check failed", "err", err)
		http.Error(w, "cannot check the session now; retry", http.StatusServiceUnavailable)
		return
	}
	if wantsPage(r) {
		http.Redirect(w, r, LoginPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	http.Error(w, err.Error(), http.StatusUnauthorized)
}

func wantsPage(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.Header.Get("Sec-Fetch-Mode") == "navigate" || strings.Contains(r.Header.Get("Accept"), "text/html")
}

// isRead says whether r only reads: GET and HEAD, and a workflow query
// (POST /api/v1/namespaces/NS/workflows/ID/query/TYPE), which the UI server
// itself allows when read-only. The path is matched segment by segment on
// both its escaped and decoded forms: the UI server's own check, a substring
// "/query/" anywhere, lets a terminate through with an encoded slash.
func isRead(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodPost:
		return isQueryPath(r.URL.EscapedPath()) && isQueryPath(r.URL.Path)
	}
	return false
}

func isQueryPath(p string) bool {
	s := strings.Split(p, "/")
	if len(s) != 9 || s[0] != "" || s[1] != "api" || s[2] != "v1" || s[3] != "namespaces" || s[5] != "workflows" || s[7] != "query" {
		return false
	}
	for _, x := range []string{s[4], s[6], s[8]} {
		if x == "" || x == "." || x == ".." {
			return false
		}
	}
	return true
}

func (g *Gate) hostAllowed(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	return g.hosts[normalHost(h)]
}

// originAllowed: no Origin (not a browser, or a same-origin GET) is fine;
// else it must be http(s) on a name the UI answers to.
func (g *Gate) originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" {
		return false
	}
	return g.hostAllowed(u.Host)
}

func normalHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
}

// quote quotes at most 64 bytes of an input for a message.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s), "?") + `"`
}
