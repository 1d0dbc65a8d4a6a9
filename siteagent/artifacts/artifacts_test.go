package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/siteagent/artifacts"
)

// fakeCP is the control plane's artifacts of this site.
type fakeCP struct {
	metas   map[string]artifacts.Meta
	data    map[string][]byte
	fetches int
	mu      sync.Mutex
}

func (f *fakeCP) fetch(_ context.Context, id string) (artifacts.Meta, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches++
	time.Sleep(20 * time.Millisecond) // a fetch takes a while: parallel requests overlap
	m, ok := f.metas[id]
	if !ok {
		return artifacts.Meta{}, nil, errs.New(errs.NotFound, "no artifact")
	}
	return m, f.data[id], nil
}

func get(t *testing.T, h http.Handler, path string, header ...string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

func TestServeFetchesChecksCachesAndExpires(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	good, bad, gone := strings.Repeat("a", 52), strings.Repeat("b", 52), strings.Repeat("c", 52)
	body := "an ISO holding a token"
	sum := sha256.Sum256([]byte(body))
	cp := &fakeCP{metas: map[string]artifacts.Meta{
		good: {Name: "seed.iso", SHA256: hex.EncodeToString(sum[:]), ExpiresAt: now.Add(time.Hour)},
		bad:  {Name: "seed.iso", SHA256: strings.Repeat("0", 64), ExpiresAt: now.Add(time.Hour)},
	}, data: map[string][]byte{good: []byte(body), bad: []byte(body)}}
	dir := t.TempDir()
	c, err := artifacts.New(dir, cp.fetch, func() time.Time { return now }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	if code, b := get(t, h, "/artifacts/"+good+"/seed.iso"); code != 200 || b != body {
		t.Fatalf("GET (first) = %d %q, want 200 and the bytes", code, b)
	}
	if code, b := get(t, h, "/artifacts/"+good+"/seed.iso", "Range", "bytes=3-5"); code != 206 || b != "ISO" || cp.fetches != 1 {
		t.Errorf("GET (range, cached) = %d %q after %d fetches, want 206 ISO after 1", code, b, cp.fetches)
	}
	// Parallel first requests of another id share one fetch.
	par := strings.Repeat("d", 52)
	cp.metas[par], cp.data[par] = cp.metas[good], cp.data[good]
	before := cp.fetches
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if code, b := get(t, h, "/artifacts/"+par+"/seed.iso", "Range", "bytes=0-1"); code != 206 || b != "an" {
				t.Errorf("GET (parallel) = %d %q, want 206 an", code, b)
			}
		})
	}
	wg.Wait()
	if n := cp.fetches - before; n != 1 {
		t.Errorf("8 parallel first requests fetched %d times, want once", n)
	}
	if fi, err := os.Stat(filepath.Join(dir, good)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cached file = %v, %v, want mode 0600", fi, err)
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/artifacts/" + good + "/other.iso", 404}, // the id's name only
		{"/artifacts/" + gone + "/seed.iso", 404},  // unknown to the control plane
		{"/artifacts/short/seed.iso", 404},         // not an id: not even asked
		{"/artifacts/" + bad + "/seed.iso", 502},   // the bytes do not match the digest
	} {
		if code, b := get(t, h, tc.path); code != tc.want || strings.Contains(b, body) {
			t.Errorf("GET %s = %d %q, want %d and not the bytes", tc.path, code, b, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, bad)); !os.IsNotExist(err) {
		t.Errorf("an artifact whose digest did not match was kept: %v", err)
	}
	now = now.Add(2 * time.Hour) // expired: gone from the cache, not fetched
	delete(cp.metas, good)
	if code, _ := get(t, h, "/artifacts/"+good+"/seed.iso"); code != 404 {
		t.Errorf("GET (expired) = %d, want 404", code)
	}
	if _, err := os.Stat(filepath.Join(dir, good)); !os.IsNotExist(err) {
		t.Errorf("an expired artifact was kept: %v", err)
	}
}

// TestExpiredSweptAtNextFetch: an expired artifact nobody asks for again
// leaves the disk at the next fetch, not only at the agent's restart.
func TestExpiredSweptAtNextFetch(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	old, fresh := strings.Repeat("a", 52), strings.Repeat("e", 52)
	sum := sha256.Sum256([]byte("iso"))
	cp := &fakeCP{metas: map[string]artifacts.Meta{
		old: {Name: "seed.iso", SHA256: hex.EncodeToString(sum[:]), ExpiresAt: now.Add(time.Hour)},
	}, data: map[string][]byte{old: []byte("iso"), fresh: []byte("iso")}}
	dir := t.TempDir()
	c, err := artifacts.New(dir, cp.fetch, func() time.Time { return now }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	if code, _ := get(t, h, "/artifacts/"+old+"/seed.iso"); code != 200 {
		t.Fatalf("GET old = %d, want 200", code)
	}
	now = now.Add(2 * time.Hour)
	cp.metas[fresh] = artifacts.Meta{Name: "seed.iso", SHA256: hex.EncodeToString(sum[:]), ExpiresAt: now.Add(time.Hour)}
	if code, _ := get(t, h, "/artifacts/"+fresh+"/seed.iso"); code != 200 {
		t.Fatalf("GET fresh = %d, want 200", code)
	}
	for _, f := range []string{old, old + ".json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("expired %s after the next fetch: stat = %v, want gone", f[50:], err)
		}
	}
}

// TestFetchOutlivesFirstRequest: a first request that goes away (a BMC
// closing one of its range reads) does not fail the fetch the others wait
// on.
func TestFetchOutlivesFirstRequest(t *testing.T) {
	id := strings.Repeat("f", 52)
	sum := sha256.Sum256([]byte("iso"))
	entered, release := make(chan struct{}, 2), make(chan struct{})
	fetch := func(ctx context.Context, _ string) (artifacts.Meta, []byte, error) {
		entered <- struct{}{}
		select {
		case <-ctx.Done():
			return artifacts.Meta{}, nil, errs.Wrap(errs.Unavailable, ctx.Err(), "fetch")
		case <-release:
		}
		return artifacts.Meta{Name: "seed.iso", SHA256: hex.EncodeToString(sum[:]), ExpiresAt: time.Now().Add(time.Hour)}, []byte("iso"), nil
	}
	c, err := artifacts.New(t.TempDir(), fetch, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	ctx, cancel := context.WithCancel(context.Background())
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/artifacts/"+id+"/seed.iso", nil).WithContext(ctx))
	<-entered
	second := make(chan int)
	go func() {
		code, _ := get(t, h, "/artifacts/"+id+"/seed.iso")
		second <- code
	}()
	time.Sleep(100 * time.Millisecond) // the second request waits on the first's fetch
	cancel()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if code := <-second; code != 200 {
		t.Errorf("GET while the first request went away = %d, want 200", code)
	}
}
