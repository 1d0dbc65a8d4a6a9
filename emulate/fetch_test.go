package emulate

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestFetchScriptSendsUUID: the machine asks for its script as iPXE would
// with the site's chain URL, its MAC and UUID (DHCP option 97's stand-in)
// in the query.
func TestFetchScriptSendsUUID(t *testing.T) {
	t.Parallel()
	var got url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query()
		_, _ = w.Write([]byte("#!ipxe\nexit\n"))
	}))
	t.Cleanup(srv.Close)
	const mac, uuid = "52:54:00:00:00:aa", "8f2c6a2e-0000-4000-8000-0000000000aa"
	if _, err := fetchScript(t.Context(), srv.Client(), srv.URL+"/", mac, uuid); err != nil {
		t.Fatalf("fetchScript() = %v", err)
	}
	if got.Get("mac") != mac || got.Get("uuid") != uuid {
		t.Errorf("fetchScript() asked for %v, want mac=%s and uuid=%s", got, mac, uuid)
	}
}
