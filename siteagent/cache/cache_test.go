package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// source serves image bytes at /img, counting requests; delay slows each.
type source struct {
	srv   *httptest.Server
	hits  atomic.Int32
	delay time.Duration
}

func startSource(t *testing.T, body []byte, delay time.Duration) *source {
	t.Helper()
	s := &source{delay: delay}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		time.Sleep(s.delay)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newCache(t *testing.T) (*Cache, *httptest.Server) {
	t.Helper()
	c, err := New(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return c, srv
}

func TestEnsureServesVerifiedImageWithRange(t *testing.T) {
	t.Parallel()
	img := []byte(strings.Repeat("better-compute image ", 100000)) // ~2 MiB
	src := startSource(t, img, 0)
	c, srv := newCache(t)
	var last atomic.Int64
	in := kinds.EnsureImageInput{ImageID: "img_1", Source: src.srv.URL + "/img?sig=secret", Digest: "sha256:" + digest(img), Size: int64(len(img))}
	out, err := c.Ensure(context.Background(), in, func(n int64) { last.Store(n) })
	if err != nil {
		t.Fatalf("Ensure() = %v", err)
	}
	want := kinds.EnsureImageOutput{Path: PathPrefix + digest(img), Size: int64(len(img))}
	if out != want || last.Load() != int64(len(img)) {
		t.Errorf("Ensure() = %+v, progress %d; want %+v, progress %d", out, last.Load(), want, len(img))
	}
	if _, err := c.Ensure(context.Background(), in, nil); err != nil || src.hits.Load() != 1 {
		t.Errorf("Ensure(again) = %v after %d source requests, want nil after 1", err, src.hits.Load())
	}

	req, _ := http.NewRequest(http.MethodGet, srv.URL+out.Path, nil)
	req.Header.Set("Range", "bytes=100-199")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusPartialContent || string(got) != string(img[100:200]) {
		t.Errorf("GET %s Range 100-199 = %d %q, want 206 %q", out.Path, resp.StatusCode, got, img[100:200])
	}
}

// TestEnsureRefusesMismatch: a whole file that is not the catalog's image
// is refused as INVALID_INPUT, which no retry mends (the source serves the
// same bytes each time), naming what to fix; a source that ended early
// without an error is a broken download, DRIVER_ERROR, retried. Nothing is
// kept either way, and the URL's query (a presigned URL's secret) is never
// shown.
func TestEnsureRefusesMismatch(t *testing.T) {
	t.Parallel()
	img := []byte("the real image")
	wrong := digest([]byte("what the catalog expects"))
	fix := "register the image again with the right --digest and --size (images register)"
	tests := []struct {
		name     string
		in       kinds.EnsureImageInput
		wantKind errs.Kind
		wantIn   []string
	}{
		{"digest", kinds.EnsureImageInput{Digest: wrong}, errs.InvalidInput, []string{"has sha256 " + digest(img), "the catalog says sha256 " + wrong, fix}},
		{"digest, size right", kinds.EnsureImageInput{Digest: wrong, Size: int64(len(img))}, errs.InvalidInput, []string{"has sha256 " + digest(img), fix}},
		{"longer", kinds.EnsureImageInput{Digest: digest(img), Size: 5}, errs.InvalidInput, []string{"longer than the 5 bytes the catalog says", fix}},
		{"size wrong, digest right", kinds.EnsureImageInput{Digest: digest(img), Size: 100}, errs.InvalidInput,
			[]string{"has the catalog's sha256 but is 14 bytes, the catalog says 100", fix}},
		{"ended early", kinds.EnsureImageInput{Digest: wrong, Size: 100}, errs.DriverError, []string{"ended after 14 of its 100 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := startSource(t, img, 0)
			c, srv := newCache(t)
			tt.in.Source = src.srv.URL + "/img?sig=topsecret"
			_, err := c.Ensure(context.Background(), tt.in, nil)
			if !errs.Is(err, tt.wantKind) || strings.Contains(err.Error(), "topsecret") {
				t.Fatalf("Ensure(%s) = %v, want %s without the URL's query", tt.name, err, tt.wantKind)
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Ensure(%s) = %v, want it to say %q", tt.name, err, w)
				}
			}
			if n := src.hits.Load(); n != 1 {
				t.Errorf("Ensure(%s) fetched the source %d times, want 1", tt.name, n)
			}
			for _, h := range []string{wrong, digest(img)} {
				if resp, err := http.Get(srv.URL + PathPrefix + h); err != nil || resp.StatusCode != http.StatusNotFound {
					t.Errorf("GET %s%s after mismatch = %v, %v; want 404", PathPrefix, h, resp.Status, err)
				}
			}
			left, _ := filepath.Glob(filepath.Join(c.dir, "*", "*"))
			if len(left) != 0 {
				t.Errorf("files left after mismatch: %v", left)
			}
		})
	}
}

func TestConcurrentEnsuresDownloadOnce(t *testing.T) {
	t.Parallel()
	img := []byte("shared image bytes")
	src := startSource(t, img, 200*time.Millisecond)
	c, _ := newCache(t)
	in := kinds.EnsureImageInput{Source: src.srv.URL + "/img", Digest: digest(img), Size: int64(len(img))}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Ensure(context.Background(), in, nil)
			errc <- err
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Errorf("Ensure() = %v", err)
		}
	}
	if got := src.hits.Load(); got != 1 {
		t.Errorf("source requests for 8 concurrent ensures = %d, want 1", got)
	}
}

func TestEnsureRefusesBadInput(t *testing.T) {
	t.Parallel()
	c, _ := newCache(t)
	tests := []kinds.EnsureImageInput{
		{Source: "http://x/img", Digest: "md5:abc"},
		{Source: "ftp://x/img", Digest: strings.Repeat("a", 64)},
		{Source: "file:///etc/passwd", Digest: strings.Repeat("a", 64)},
		{Source: "http://x/img", Digest: strings.Repeat("a", 64), Size: -1},
	}
	for _, in := range tests {
		if _, err := c.Ensure(context.Background(), in, nil); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("Ensure(%+v) = %v, want INVALID_INPUT", in, err)
		}
	}
}

// TestEnsureSourceAnswers: a source that says the image is not there
// (404, 403) is INVALID_INPUT, which no retry mends, naming the fix; one
// that may mend (500, 429) stays DRIVER_ERROR, which the deploy retries.
func TestEnsureSourceAnswers(t *testing.T) {
	t.Parallel()
	c, _ := newCache(t)
	for _, tc := range []struct {
		status int
		want   errs.Kind
	}{
		{http.StatusNotFound, errs.InvalidInput}, {http.StatusForbidden, errs.InvalidInput}, {http.StatusGone, errs.InvalidInput},
		{http.StatusInternalServerError, errs.DriverError}, {http.StatusTooManyRequests, errs.DriverError},
		{http.StatusRequestTimeout, errs.DriverError},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(tc.status) }))
		in := kinds.EnsureImageInput{ImageID: "img_1", Source: srv.URL + "/img", Digest: "sha256:" + strings.Repeat("a", 64)}
		_, err := c.Ensure(context.Background(), in, nil)
		srv.Close()
		if !errs.Is(err, tc.want) || !strings.Contains(err.Error(), http.StatusText(tc.status)) {
			t.Errorf("Ensure against HTTP %d = %v, want %s naming the status", tc.status, err, tc.want)
		}
		if tc.want == errs.InvalidInput && !strings.Contains(err.Error(), "images register") {
			t.Errorf("Ensure against HTTP %d = %v, want it to say how to mend the source", tc.status, err)
		}
	}
}

func TestNewRemovesLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(dir, "tmp", "abc.123")
	if err := os.WriteFile(partial, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Errorf("New() left the partial download %s: %v", partial, err)
	}
}
