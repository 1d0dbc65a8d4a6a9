package webui

import (
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// maxLoginBody bounds the login form: one token.
const maxLoginBody = 4 << 10

// login serves the login page (GET) and exchanges an API token for a session
// (POST: form field token, or Authorization: Bearer). Any live token gets a
// session, which the codec endpoint honours for its tenant; the UI itself
// then answers 403 to a tenant that is not an operator.
func (g *Gate) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	next := localPath(r.FormValue("next"))
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		g.page(w, http.StatusOK, next, "")
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "use GET for the login page or POST a token", http.StatusMethodNotAllowed)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		token = r.PostFormValue("token")
	}
	token = strings.TrimSpace(token)
	if token == "" || len(token) > 256 {
		g.page(w, http.StatusUnauthorized, next, "Paste an API token (BETTER_COMPUTE_TOKEN, or <data-dir>/root-token for root).")
		return
	}
	tenant, tokenID, err := g.cfg.Tokens.LookupAPIToken(r.Context(), pki.HashToken(token))
	if errs.Is(err, errs.NotFound) {
		g.page(w, http.StatusUnauthorized, next, "That API token is not known or was revoked.")
		return
	}
	if err != nil {
		g.cfg.Logger.Error("web UI login: token lookup failed", "err", err)
		g.page(w, http.StatusServiceUnavailable, next, "The control plane cannot check tokens now; retry.")
		return
	}
	s := session{tenant: tenant, tokenID: tokenID, expires: time.Now().Add(g.cfg.SessionTTL)}
	http.SetCookie(w, g.cookie(r, s.sign(g.cfg.Key), s.expires))
	g.cfg.Logger.Info("web UI login", "tenant", tenant, "tokenId", tokenID)
	if !g.operator(tenant) {
		g.page(w, http.StatusForbidden, next, "Tenant "+tenant+" may not see the Web UI: it shows every tenant's workflows. Log in with a token of tenant "+g.cfg.RootTenant+".")
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the browser's session (POST only, so a link cannot log out).
// The signed cookie itself stays valid until it expires or its token is
// revoked; logging out forgets it.
func (g *Gate) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST to log out", http.StatusMethodNotAllowed)
		return
	}
	http.SetCookie(w, g.cookie(r, "", time.Unix(0, 0)))
	http.Redirect(w, r, LoginPath, http.StatusSeeOther)
}

// cookie is the session cookie: HttpOnly (no script reads it), SameSite
// Strict (no other site's page sends it), Secure when served over TLS.
func (g *Gate) cookie(r *http.Request, value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: SessionCookie, Value: value, Path: "/", Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	if value == "" {
		c.MaxAge = -1
	}
	return c
}

// localPath keeps a redirect target on this origin: a path, never
// "//host" or a URL.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") || strings.ContainsAny(p, "\r\n") {
		return "/"
	}
	return p
}

func (g *Gate) page(w http.ResponseWriter, status int, next, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct{ Action, Next, Msg string }{LoginPath, next, msg})
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>better-compute · Temporal Web UI</title>
<style>body{font-family:sans-serif;max-width:32em;margin:4em auto}input{width:100%;padding:.4em}p.err{color:#a00}</style></head>
<body><h1>Temporal Web UI</h1>
<p>Log in with an API token of the root tenant (<code>&lt;data-dir&gt;/root-token</code>).</p>
{{if .Msg}}<p class="err">{{.Msg}}</p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="next" value="{{.Next}}">
<label>API token <input type="password" name="token" autocomplete="off" autofocus></label>
<p><button type="submit">Log in</button></p>
</form></body></html>
`))
