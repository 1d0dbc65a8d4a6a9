package redfish

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	keptmap "github.com/better-compute/better-compute/internal/kept"
)

// TestRootCache: the service root is read from the BMC once a minute; a
// failed answer is never kept; a 404 or an unreachable BMC makes the next
// operation read the root afresh (its paths may have moved).
func TestRootCache(t *testing.T) {
	var roots atomic.Int32
	status := atomic.Int32{}
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redfish/v1/":
			roots.Add(1)
			w.WriteHeader(int(status.Load()))
			_, _ = io.WriteString(w, `{"Systems":{"@odata.id":"/redfish/v1/Systems"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	now := time.Unix(0, 0)
	c := newRootCache(http.DefaultTransport)
	c.kept.Now = func() time.Time { return now }
	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	steps := []struct {
		what      string
		do        func()
		wantRoots int32
	}{
		{"first read", func() { get("/redfish/v1/") }, 1},
		{"read again", func() { get("/redfish/v1/") }, 1},
		{"59 s later", func() { now = now.Add(59 * time.Second); get("/redfish/v1/") }, 1},
		{"a minute later", func() { now = now.Add(time.Second); get("/redfish/v1/") }, 2},
		{"after a 404 elsewhere", func() { get("/redfish/v1/Gone"); get("/redfish/v1/") }, 3},
		{"a failed answer", func() {
			now = now.Add(time.Minute)
			status.Store(http.StatusServiceUnavailable)
			get("/redfish/v1/")
		}, 4},
		{"is not kept", func() { status.Store(http.StatusOK); get("/redfish/v1/") }, 5},
		{"the good one is", func() { get("/redfish/v1/") }, 5},
	}
	for _, s := range steps {
		s.do()
		if got := roots.Load(); got != s.wantRoots {
			t.Fatalf("%s: the BMC answered %d service roots, want %d", s.what, got, s.wantRoots)
		}
	}
	if code, body := get("/redfish/v1/"); code != http.StatusOK || body != `{"Systems":{"@odata.id":"/redfish/v1/Systems"}}` {
		t.Errorf("kept answer = %d %q", code, body)
	}
	// Once many are kept, the roots of BMCs not asked for a minute go.
	for i := range keptmap.SweepAt {
		c.kept.Put(fmt.Sprintf("http://bmc-%d.test", i), keptRoot{}, now.Add(-time.Minute))
	}
	now = now.Add(time.Minute)
	get("/redfish/v1/")
	if c.kept.Len() != 1 {
		t.Errorf("%d roots kept after a sweep, want 1 (this BMC's)", c.kept.Len())
	}
}
