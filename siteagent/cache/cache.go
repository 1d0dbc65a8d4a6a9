// Package cache owns the site agent's content-addressed image cache: it
// downloads an image (http or https) to a temporary file while hashing it,
// checks its size and SHA-256 digest, and only then renames it to
// <dir>/sha256/<hex>, where the boot listener serves it (Range requests
// included, so ramdisks resume). A partial or unverified file is never
// served; concurrent ensures of one digest download once.
package cache

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// PathPrefix is where the boot listener serves verified images.
const PathPrefix = "/cache/sha256/"

// progressEvery is how often a caller waiting on another's download hears
// of its progress.
const progressEvery = time.Second

// Cache is the image cache. Its methods are safe for concurrent use.
type Cache struct {
	dir    string
	client *http.Client
	log    *slog.Logger

	mu       sync.Mutex
	inflight map[string]*download // by hex digest

	// Count hears each Ensure that ends well: hit when the image was
	// already there, and the bytes this call's own download fetched (zero
	// for a call that waited on another's). Set before use; nil counts
	// nothing.
	Count func(hit bool, fetched int64)
}

// download is one digest being fetched.
type download struct {
	done  chan struct{}
	bytes atomic.Int64
	out   kinds.EnsureImageOutput
	err   error
}

// New opens the cache in dir, creating dir/sha256 and dir/tmp, and removes
// temporary files a crash left behind. client fetches sources; nil uses a
// client without an overall timeout (images are large).
func New(dir string, client *http.Client, log *slog.Logger) (*Cache, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	for _, d := range []string{"sha256", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "cannot create the image cache in %s", dir)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "tmp", "*"))
	for _, f := range leftovers {
		_ = os.Remove(f)
	}
	return &Cache{dir: dir, client: client, log: log, inflight: map[string]*download{}}, nil
}

// ParseDigest returns the lowercase hex of a sha256 digest given as
// "sha256:<hex>" or "<hex>".
func ParseDigest(s string) (string, error) {
	h := strings.ToLower(strings.TrimPrefix(s, "sha256:"))
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", errs.Invalid("digest", "digest %q is not sha256:<64 hex digits>", s)
	}
	return h, nil
}

// Path returns where a verified image would be, on disk.
func (c *Cache) Path(hex string) string { return filepath.Join(c.dir, "sha256", hex) }

// Has reports whether the image with digest hex is present and verified.
func (c *Cache) Has(hex string) bool {
	st, err := os.Stat(c.Path(hex))
	return err == nil && st.Mode().IsRegular()
}

// Ensure makes the image present and verified. progress hears the bytes
// downloaded so far (also while another caller's download of the same
// digest runs). Safe to call twice and concurrently.
func (c *Cache) Ensure(ctx context.Context, in kinds.EnsureImageInput, progress func(int64)) (kinds.EnsureImageOutput, error) {
	hex, err := ParseDigest(in.Digest)
	if err != nil {
		return kinds.EnsureImageOutput{}, err
	}
	if in.Size < 0 {
		return kinds.EnsureImageOutput{}, errs.Invalid("size", "size %d is negative", in.Size)
	}
	if progress == nil {
		progress = func(int64) {}
	}
	for first := true; ; first = false {
		if out, ok := c.present(hex); ok {
			c.count(first, 0)
			return out, nil
		}
		d, leader := c.join(hex)
		if leader {
			c.fetch(ctx, d, hex, in, progress)
		}
		if err := wait(ctx, d, progress); err != nil {
			return kinds.EnsureImageOutput{}, err
		}
		// A leader that was cancelled leaves the others to try again.
		if d.err == nil || leader || !isContextErr(d.err) {
			if d.err == nil {
				c.count(false, fetchedBy(leader, d.out.Size))
			}
			return d.out, d.err
		}
	}
}

func (c *Cache) count(hit bool, fetched int64) {
	if c.Count != nil {
		c.Count(hit, fetched)
	}
}

// fetchedBy is what a call's own download fetched: all of it for the
// leader, nothing for a follower.
func fetchedBy(leader bool, size int64) int64 {
	if leader {
		return size
	}
	return 0
}

func (c *Cache) present(hex string) (kinds.EnsureImageOutput, bool) {
	st, err := os.Stat(c.Path(hex))
	if err != nil || !st.Mode().IsRegular() {
		return kinds.EnsureImageOutput{}, false
	}
	return kinds.EnsureImageOutput{Path: PathPrefix + hex, Size: st.Size()}, true
}

// join returns the download of hex, starting one if none runs.
func (c *Cache) join(hex string) (*download, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.inflight[hex]; ok {
		return d, false
	}
	d := &download{done: make(chan struct{})}
	c.inflight[hex] = d
	return d, true
}

func (c *Cache) fetch(ctx context.Context, d *download, hex string, in kinds.EnsureImageInput, progress func(int64)) {
	d.out, d.err = c.download(ctx, hex, in, func(n int64) {
		d.bytes.Store(n)
		progress(n)
	})
	c.mu.Lock()
	delete(c.inflight, hex)
	c.mu.Unlock()
	close(d.done)
}

func wait(ctx context.Context, d *download, progress func(int64)) error {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-d.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			progress(d.bytes.Load())
		}
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Handler serves GET /cache/sha256/<hex>: verified images only, with Range.
func (c *Cache) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hex, err := ParseDigest(strings.TrimPrefix(r.URL.Path, PathPrefix))
		if err != nil || !strings.HasPrefix(r.URL.Path, PathPrefix) {
			http.Error(w, "better-compute: not an image path; want "+PathPrefix+"<sha256 hex>", http.StatusNotFound)
			return
		}
		f, err := os.Open(c.Path(hex))
		if errors.Is(err, fs.ErrNotExist) {
			http.Error(w, "better-compute: image sha256:"+hex+" is not in this site's cache; run cache.ensureImage first", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, "better-compute: cannot open the image", http.StatusInternalServerError)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			http.Error(w, "better-compute: cannot stat the image", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("ETag", `"sha256:`+hex+`"`)
		http.ServeContent(w, r, "", st.ModTime(), f)
	})
}
