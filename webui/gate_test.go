package webui

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temporalio/ui-server/v2/server/config"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// Tokens of the fake store: root's and two tenants'.
const (
	rootToken = "bcapi_root-token-for-the-web-ui-tests"
	taToken   = "bcapi_tenant-a-token-for-the-web-ui-tests"
	tbToken   = "bcapi_tenant-b-token-for-the-web-ui-tests"
)

type fakeTokens struct {
	mu      sync.Mutex
	byHash  map[string][2]string // hash → tenant, token id
	revoked map[string]bool
}

func newFakeTokens() *fakeTokens {
	f := &fakeTokens{byHash: map[string][2]string{}, revoked: map[string]bool{}}
	for tok, tenant := range map[string]string{rootToken: "root", taToken: "ta", tbToken: "tb"} {
		f.byHash[string(pki.HashToken(tok))] = [2]string{tenant, "tok_" + tenant}
	}
	return f
}

func (f *fakeTokens) LookupAPIToken(_ context.Context, hash []byte) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.byHash[string(hash)]
	if !ok || f.revoked[t[1]] {
		return "", "", errs.New(errs.NotFound, "no such API token")
	}
	return t[0], t[1], nil
}

func (f *fakeTokens) APITokenTenant(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.byHash {
		if t[1] == id && !f.revoked[id] {
			return t[0], nil
		}
	}
	return "", errs.New(errs.NotFound, "no such API token")
}

func (f *fakeTokens) revoke(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[id] = true
}

// frontend is a fake Temporal frontend that records the terminates it gets:
// the real UI server's handler talks gRPC to it.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	mu         sync.Mutex
	terminated []string
}

func (f *frontend) TerminateWorkflowExecution(_ context.Context, r *workflowservice.TerminateWorkflowExecutionRequest) (*workflowservice.TerminateWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminated = append(f.terminated, r.GetWorkflowExecution().GetWorkflowId())
	return &workflowservice.TerminateWorkflowExecutionResponse{}, nil
}

func (f *frontend) terminates() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.terminated...)
}

func startFrontend(t *testing.T) (*frontend, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &frontend{}
	s := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(s, f)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return f, ln.Addr().String()
}

type testUI struct {
	url      string
	frontend *frontend
	tokens   *fakeTokens
}

// startUI serves the real UI server's handler behind a gate. uiReadOnly is
// the UI server's own DisableWriteActions, set apart from the gate's rule to
// show the gate enforces it alone.
func startUI(t *testing.T, cfg Config, uiReadOnly bool, codecH http.Handler) testUI {
	t.Helper()
	f, addr := startFrontend(t)
	ui, err := UIHandler(&config.Config{TemporalGRPCAddress: addr, EnableUI: true, HideLogs: true,
		DisableNewsFetch: true, DisableWriteActions: uiReadOnly, CORS: config.CORS{CookieInsecure: true},
		Codec: config.Codec{Endpoint: CodecPath}})
	if err != nil {
		t.Fatalf("UIHandler = %v", err)
	}
	tokens := newFakeTokens()
	cfg.Tokens, cfg.Key, cfg.RootTenant, cfg.Codec = tokens, SessionKey([]byte("a secret the control plane holds")), "root", codecH
	cfg.Logger = slog.New(slog.DiscardHandler)
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	srv := httptest.NewServer(g.Wrap(ui))
	t.Cleanup(srv.Close)
	return testUI{url: srv.URL, frontend: f, tokens: tokens}
}

// client is a browser-like client: a cookie jar, no redirects followed.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login posts token to the login form and returns the answer's status.
func (u testUI) login(t *testing.T, c *http.Client, token string) int {
	t.Helper()
	resp, err := c.PostForm(u.url+LoginPath, url.Values{"token": {token}, "next": {"/namespaces"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func do(t *testing.T, c *http.Client, method, u string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			// The jar keys cookies by Host, as a browser would; this
			// client stands for one that holds the session and sends it
			// to the other name (a proxy, or a rebinding page's fetch).
			req.Host = v
			for _, k := range c.Jar.Cookies(req.URL) {
				req.AddCookie(k)
			}
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// csrf is the UI server's CSRF cookie, which a POST echoes as X-CSRF-Token;
// a GET through the gate gets one.
func (u testUI) csrf(t *testing.T, c *http.Client) map[string]string {
	t.Helper()
	if code, body := do(t, c, http.MethodGet, u.url+"/api/v1/settings", nil); code != http.StatusOK {
		t.Fatalf("GET /api/v1/settings = %d %s, want 200", code, body)
	}
	base, _ := url.Parse(u.url)
	for _, k := range c.Jar.Cookies(base) {
		if k.Name == "_csrf" {
			return map[string]string{"X-CSRF-Token": k.Value, "Content-Type": "application/json"}
		}
	}
	t.Fatal("no _csrf cookie from the UI server")
	return nil
}

func TestUIWithoutSession(t *testing.T) {
	t.Parallel()
	u := startUI(t, Config{}, true, nil)
	c := client(t)
	if code, body := do(t, c, http.MethodGet, u.url+"/api/v1/namespaces", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/namespaces without a session = %d %s, want 401", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, u.url+"/namespaces/x/workflows", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, LoginPath+"?next=") {
		t.Errorf("GET /namespaces/x/workflows (a page) without a session = %d to %q, want 303 to %s", resp.StatusCode, loc, LoginPath)
	}
	if code := u.login(t, c, "bcapi_not-a-known-token"); code != http.StatusUnauthorized {
		t.Errorf("login with an unknown token = %d, want 401", code)
	}
	if code, _ := do(t, c, http.MethodGet, u.url+"/api/v1/settings", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/settings after a failed login = %d, want 401", code)
	}
}

func TestUILogin(t *testing.T) {
	t.Parallel()
	u := startUI(t, Config{}, true, nil)
	c := client(t)
	resp, err := c.PostForm(u.url+LoginPath, url.Values{"token": {rootToken}, "next": {"/namespaces"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/namespaces" {
		t.Fatalf("login as root = %d to %q, want 303 to /namespaces", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Name != SessionCookie || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Secure {
		t.Errorf("login cookies = %+v, want one %s, HttpOnly, SameSite=Strict, not Secure over plain HTTP", cookies, SessionCookie)
	}
	if strings.Contains(cookies[0].Value, rootToken) {
		t.Errorf("session cookie %q holds the API token", cookies[0].Value)
	}
	if code, body := do(t, c, http.MethodGet, u.url+"/api/v1/settings", nil); code != http.StatusOK || !strings.Contains(body, CodecPath) {
		t.Errorf("GET /api/v1/settings as root = %d %s, want 200 with the codec endpoint", code, body)
	}
	if code, body := do(t, c, http.MethodGet, u.url+"/namespaces", map[string]string{"Accept": "text/html"}); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("GET /namespaces (a page) as root = %d, want 200 with the UI's page", code)
	}
	u.tokens.revoke("tok_root")
	if code, _ := do(t, c, http.MethodGet, u.url+"/api/v1/settings", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/settings after the token's revocation = %d, want 401", code)
	}
}

func TestUINonOperatorSession(t *testing.T) {
	t.Parallel()
	u := startUI(t, Config{}, true, nil)
	c := client(t)
	if code := u.login(t, c, taToken); code != http.StatusForbidden {
		t.Errorf("login as tenant ta = %d, want 403 (not an operator)", code)
	}
	for _, p := range []string{"/api/v1/settings", "/api/v1/namespaces", "/"} {
		if code, body := do(t, c, http.MethodGet, u.url+p, nil); code != http.StatusForbidden {
			t.Errorf("GET %s with tenant ta's session = %d %s, want 403", p, code, body)
		}
	}
}

func TestUIHostAndOrigin(t *testing.T) {
	t.Parallel()
	u := startUI(t, Config{Listen: "10.1.2.3:8233", Hosts: []string{"ui.lab.example"}}, true, nil)
	c := client(t)
	if code := u.login(t, c, rootToken); code != http.StatusSeeOther {
		t.Fatalf("login as root = %d, want 303", code)
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"rebound name", map[string]string{"Host": "attacker.example:8233"}, http.StatusMisdirectedRequest},
		{"rebound name, no port", map[string]string{"Host": "attacker.example"}, http.StatusMisdirectedRequest},
		{"suffix of an allowed name", map[string]string{"Host": "evil-ui.lab.example"}, http.StatusMisdirectedRequest},
		{"foreign origin", map[string]string{"Origin": "http://attacker.example"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"--ui-host name", map[string]string{"Host": "UI.lab.example:8233", "Origin": "http://ui.lab.example:8233"}, http.StatusOK},
		{"listen address", map[string]string{"Host": "10.1.2.3:8233"}, http.StatusOK},
		{"localhost", map[string]string{"Host": "localhost:8233"}, http.StatusOK},
		{"loopback v6", map[string]string{"Host": "[::1]:8233"}, http.StatusOK},
	} {
		if code, body := do(t, c, http.MethodGet, u.url+"/api/v1/settings", tc.hdr); code != tc.want {
			t.Errorf("%s: GET /api/v1/settings %v = %d %.80s, want %d", tc.name, tc.hdr, code, body, tc.want)
		}
	}
	if code, _ := do(t, c, http.MethodPost, u.url+LoginPath, map[string]string{"Host": "attacker.example"}); code != http.StatusMisdirectedRequest {
		t.Errorf("POST %s with a foreign Host = %d, want 421", LoginPath, code)
	}
}

// terminate is the UI's terminate call for workflow id (path-escaped as given).
func terminate(u testUI, rawID string) string {
	return u.url + "/api/v1/namespaces/ns/workflows/" + rawID + "/terminate"
}

func TestUIWriteActions(t *testing.T) {
	t.Parallel()
	t.Run("read-only", func(t *testing.T) {
		t.Parallel()
		// The UI server itself would allow writes: the gate alone refuses.
		u := startUI(t, Config{}, false, nil)
		c := client(t)
		if code := u.login(t, c, rootToken); code != http.StatusSeeOther {
			t.Fatalf("login as root = %d, want 303", code)
		}
		hdr := u.csrf(t, c)
		for _, p := range []string{terminate(u, "wf-1"), terminate(u, "wf%2Fquery%2F"),
			u.url + "/api/v1/namespaces/ns/workflows/wf/query/q/../../terminate"} {
			if code, body := do(t, c, http.MethodPost, p, hdr); code != http.StatusForbidden {
				t.Errorf("POST %s as root, read-only = %d %s, want 403", p, code, body)
			}
		}
		if got := u.frontend.terminates(); len(got) != 0 {
			t.Errorf("frontend terminated %v in read-only mode, want none", got)
		}
	})
	t.Run("ui-write-actions", func(t *testing.T) {
		t.Parallel()
		u := startUI(t, Config{WriteActions: true}, false, nil)
		c := client(t)
		if code := u.login(t, c, rootToken); code != http.StatusSeeOther {
			t.Fatalf("login as root = %d, want 303", code)
		}
		if code, body := do(t, c, http.MethodPost, terminate(u, "wf-1"), u.csrf(t, c)); code != http.StatusOK {
			t.Errorf("POST terminate as root with write actions = %d %s, want 200", code, body)
		}
		if got := u.frontend.terminates(); len(got) != 1 || got[0] != "wf-1" {
			t.Errorf("frontend terminated %v, want [wf-1]", got)
		}
	})
}

func TestIsQueryPath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"/api/v1/namespaces/ns/workflows/wf/query/__stack_trace": true,
		"/api/v1/namespaces/ns/workflows/wf/terminate":           false,
		"/api/v1/namespaces/ns/workflows/wf/query/":              false,
		"/api/v1/namespaces/ns/workflows/wf/query/q/terminate":   false,
		"/api/v1/namespaces/ns/workflows/../query/q":             false,
		"/api/v1/namespaces/ns/batch-operations/query/q/x":       false,
	} {
		if got := isQueryPath(p); got != want {
			t.Errorf("isQueryPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	ok := Config{Tokens: newFakeTokens(), Key: SessionKey([]byte("k")), RootTenant: "root"}
	for name, edit := range map[string]func(*Config){
		"short key":        func(c *Config) { c.Key = []byte("short") },
		"no tokens":        func(c *Config) { c.Tokens = nil },
		"a URL as ui-host": func(c *Config) { c.Hosts = []string{"http://ui.example"} },
		"an empty ui-host": func(c *Config) { c.Hosts = []string{""} },
	} {
		c := ok
		edit(&c)
		if _, err := New(c); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("New(%s) = %v, want INVALID_INPUT", name, err)
		}
	}
}

// TestSessionSignature: a session is honoured by every gate holding the
// key (another serve process) and by no other; a forged or expired one is
// refused.
func TestSessionSignature(t *testing.T) {
	t.Parallel()
	key := SessionKey([]byte("the key file"))
	now := time.Unix(time.Now().Unix(), 0) // a session's expiry has whole seconds
	s := session{tenant: "root", tokenID: "tok_root", expires: now.Add(time.Hour)}
	if got, err := parseSession(key, s.sign(key), now); err != nil || got != s {
		t.Errorf("parseSession(signed) = %+v, %v, want %+v", got, err, s)
	}
	forged := session{tenant: "root", tokenID: "tok_ta", expires: s.expires}.sign(SessionKey([]byte("another key")))
	expired := session{tenant: "root", tokenID: "tok_root", expires: now.Add(-time.Second)}.sign(key)
	body, _, _ := strings.Cut(s.sign(key), ".")
	for name, c := range map[string]string{"another key": forged, "expired": expired, "no signature": body, "garbage": "a.b.c"} {
		if _, err := parseSession(key, c, now); !errs.Is(err, errs.Unauthenticated) {
			t.Errorf("parseSession(%s) = %v, want UNAUTHENTICATED", name, err)
		}
	}
}
