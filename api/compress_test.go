package api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/api"
)

// TestOnlyLargeResponsesAreCompressed: a client that accepts gzip gets a
// small answer as it is (gzip would cost more than it saves) and a large
// one compressed.
func TestOnlyLargeResponsesAreCompressed(t *testing.T) {
	e := newEnv(t)
	encoding := func() (string, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.url+sitesList, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept-Encoding", "gzip")
		req.Header.Set("Authorization", "Bearer "+e.root)
		resp, err := http.DefaultTransport.RoundTrip(req) // keeps the body as sent
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("sites list = %d %s", resp.StatusCode, b)
		}
		return resp.Header.Get("Content-Encoding"), len(b)
	}
	e.ok(e.root, sitesCreate, `{"kind":"shared","region":"lab-1"}`)
	if enc, n := encoding(); enc != "" || n >= api.CompressMinBytes {
		t.Errorf("one site: Content-Encoding %q, %d bytes; want a small answer as it is", enc, n)
	}
	for i := range 40 {
		e.ok(e.root, sitesCreate, fmt.Sprintf(`{"kind":"shared","region":"lab-%d"}`, i))
	}
	if enc, _ := encoding(); enc != "gzip" {
		t.Errorf("41 sites: Content-Encoding %q, want gzip", enc)
	}
}
