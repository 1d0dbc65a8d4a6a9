package api_test

import (
	"errors"

	"bytes"
	"connectrpc.com/connect"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// env is a real API over a fresh database, with a root token and a token of
// tenant "acme".
type env struct {
	t          *testing.T
	url        string
	store      *store.Store
	root, acme string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := testpg.New(t)
	ctx := context.Background()
	if err := s.EnsureTenant(ctx, api.RootTenant); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: s}
	e.root = token(t, s, api.RootTenant)
	if err := s.CreateTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	e.acme = token(t, s, "acme")
	hw := config.HardwareProfiles{"emulated-redfish": {Drivers: config.Drivers{Power: "redfish", Management: "redfish", Boot: "ipxe", Deploy: "image-stream"}}}
	srv := httptest.NewServer(api.New(api.Config{Store: s, Hardware: hw}).Handler())
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

func token(t *testing.T, s *store.Store, tenant string) string {
	plain, hash := pki.NewToken(pki.TokenAPI)
	if _, err := s.CreateAPIToken(context.Background(), tenant, "test", hash); err != nil {
		t.Fatal(err)
	}
	return string(plain)
}

// call posts body to method ("sites.create" style is not needed: give the
// Connect path) and returns the status and decoded JSON.
func (e *env) call(tok, procedure, body string) (int, map[string]any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+procedure, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			e.t.Fatalf("%s: not JSON: %s", procedure, b)
		}
	}
	return resp.StatusCode, out
}

func (e *env) ok(tok, procedure, body string) map[string]any {
	e.t.Helper()
	code, out := e.call(tok, procedure, body)
	if code != 200 {
		e.t.Fatalf("%s(%s) = %d %v, want 200", procedure, body, code, out)
	}
	return out
}

// kindOf reads the error kind the API put in the error's details
// (debug form, as Connect's JSON carries it next to the bytes).
func kindOf(out map[string]any) string {
	details, _ := out["details"].([]any)
	for _, d := range details {
		m, _ := d.(map[string]any)
		if dbg, ok := m["debug"].(map[string]any); ok {
			if k, ok := dbg["kind"].(string); ok {
				return k
			}
		}
	}
	return ""
}

func field(out map[string]any) string {
	details, _ := out["details"].([]any)
	for _, d := range details {
		m, _ := d.(map[string]any)
		if dbg, ok := m["debug"].(map[string]any); ok {
			f, _ := dbg["field"].(string)
			return f
		}
	}
	return ""
}

const (
	sitesCreate  = "/bettercompute.v1.SitesService/Create"
	sitesGet     = "/bettercompute.v1.SitesService/Get"
	sitesList    = "/bettercompute.v1.SitesService/List"
	poolsCreate  = "/bettercompute.v1.PoolsService/Create"
	poolsList    = "/bettercompute.v1.PoolsService/List"
	imagesReg    = "/bettercompute.v1.ImagesService/Register"
	profCreate   = "/bettercompute.v1.ProfilesService/Create"
	profValidate = "/bettercompute.v1.ProfilesService/Validate"
	tokCreate    = "/bettercompute.v1.SiteTokensService/Create"
	hwList       = "/bettercompute.v1.HardwareProfilesService/List"
)

func nested(m map[string]any, keys ...string) string {
	var cur any = m
	for _, k := range keys {
		mm, _ := cur.(map[string]any)
		cur = mm[k]
	}
	s, _ := cur.(string)
	return s
}

func asConnectErr(err error, target **connect.Error) bool { return errors.As(err, target) }
