package api_test

import (
	"bytes"
	"context"
	"crypto"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// siteClient returns a client presenting a fresh site certificate for site.
func (a *agentsEnv) siteClient(t *testing.T, site string) *http.Client {
	t.Helper()
	key, _, err := pki.NewEd25519Key()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := a.ca.Issue(key.Public(), pki.RoleSite, site, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return a.client(t, certPEM, crypto.Signer(key))
}

func httpDo(t *testing.T, hc *http.Client, method, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		return &http.Response{StatusCode: 0, Status: err.Error()}, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// A site fetches its own site's unexpired artifacts, by id, after saying
// where it serves them; another site's, an expired one and an anonymous
// caller get nothing.
func TestArtifactsForTheSiteOnly(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	if err := a.store.DeclareServeHosts(ctx, "root", a.site, []string{"127.0.0.1"}, nil); err != nil {
		t.Fatal(err)
	}
	siteA := a.siteClient(t, a.site)
	for _, tc := range []struct {
		url  string
		want int
	}{{"http://10.9.9.9:8080", 400}, {"https://127.0.0.1:8080", 400}, {"http://127.0.0.1", 400}, {"http://127.0.0.1:8080", 204}} {
		if resp, b := httpDo(t, siteA, "PUT", a.url+api.ArtifactsBase, `{"url":"`+tc.url+`"}`); resp.StatusCode != tc.want {
			t.Errorf("PUT %s %s = %s %s, want %d", api.ArtifactsBase, tc.url, resp.Status, b, tc.want)
		}
	}
	pool, err := a.store.CreatePool(ctx, store.Pool{TenantID: "root", SiteID: a.site, Class: "c", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	node, err := a.store.CreateNode(ctx, store.Node{ID: ids.New(ids.Node), TenantID: "root", SiteID: a.site, PoolID: pool.ID,
		BMCAddress: "https://bmc.test/redfish/v1/Systems/1", BMCDriver: "redfish", BMCCredentialsRef: "env://BCD_SECRET_X"})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("an ISO holding a token")
	var url string
	if err := pgx.BeginFunc(ctx, a.store.Pool(), func(tx pgx.Tx) (err error) {
		url, err = controlplane.ArtifactStore{}.Publish(ctx, tx, sdk.Node{ID: node.ID, TenantID: "root"}, "seed.iso", data, time.Hour)
		return err
	}); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	rest, ok := strings.CutPrefix(url, "http://127.0.0.1:8080/artifacts/")
	id, _, _ := strings.Cut(rest, "/")
	if !ok {
		t.Fatalf("Publish = %q, want a URL on the site's boot listener", url)
	}
	siteB, _, err := a.store.CreateSite(ctx, store.Site{TenantID: "root", Kind: "shared", Region: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	fetch := a.url + "/v1/artifacts/" + id
	for _, tc := range []struct {
		name string
		hc   *http.Client
		want int
	}{{"another site", a.siteClient(t, siteB.ID), 404}, {"no certificate", a.client(t, nil, nil), 401}} {
		if resp, b := httpDo(t, tc.hc, "GET", fetch, ""); resp.StatusCode != tc.want || bytes.Contains(b, data) {
			t.Errorf("GET artifact (%s) = %s %q, want %d and not the bytes", tc.name, resp.Status, b, tc.want)
		}
	}
	resp, b := httpDo(t, siteA, "GET", fetch, "")
	if resp.StatusCode != 200 || !bytes.Equal(b, data) || len(resp.Header.Get(api.ArtifactSHA256Header)) != 64 || resp.Header.Get(api.ArtifactNameHeader) != "seed.iso" {
		t.Fatalf("GET artifact (its site) = %s %q %v, want 200, the bytes, digest and name", resp.Status, b, resp.Header)
	}
	if _, err := a.store.Pool().Exec(ctx, `UPDATE artifacts SET expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if resp, _ := httpDo(t, siteA, "GET", fetch, ""); resp.StatusCode != 404 {
		t.Errorf("GET artifact (expired) = %s, want 404", resp.Status)
	}
}
