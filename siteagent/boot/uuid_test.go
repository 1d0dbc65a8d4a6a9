package boot

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptRequestRecordsUUID: an unknown MAC fetching its script is a
// sighting with the uuid parameter, lowercased; a malformed one is
// ignored (the machine still gets its script), a request without one keeps
// what was known, and the reporter is woken.
func TestScriptRequestRecordsUUID(t *testing.T) {
	t.Parallel()
	tab, err := Open(filepath.Join(t.TempDir(), "boot.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tab.Handler(Params{BootURL: "http://boot"}, ""))
	t.Cleanup(srv.Close)
	const mac, uuid = "52:54:00:aa:00:0b", "8f2c6a2e-0000-4000-8000-0000000000aa"
	for _, q := range []string{"&uuid=" + strings.ToUpper(uuid), "&uuid=not-a-uuid-at-all-but-36-chars-long", "",
		"&uuid=8f2c6a2e-0000-4000-8000-0000000000a" /* 35 */, "&uuid=8f2c6a2e00000-4000-8000-0000000000aa"} {
		if status, body := get(t, srv.URL+"/ipxe?mac="+mac+q); status != 200 || !strings.Contains(body, "exit") {
			t.Errorf("GET /ipxe?mac=%s%s = %d %q, want 200 and an exit", mac, q, status, body)
		}
	}
	ds := tab.Discoveries()
	if len(ds) != 1 || ds[0].ClientUUID != uuid || ds[0].Count != 5 {
		t.Errorf("Discoveries() = %+v, want %s with UUID %s seen 5 times", ds, mac, uuid)
	}
	select {
	case <-tab.DiscoveriesChanged():
	default:
		t.Errorf("DiscoveriesChanged() did not receive after the sightings")
	}
}
