// Package artifacts serves, on the site agent's boot listener, the per-node
// files control-plane steps published (sdk.Artifacts: an autoinstall ISO
// holding a node's join token) at /artifacts/<id>/<name>, where a machine's
// BMC or installer fetches them over plain HTTP. A file is fetched from the
// control plane at its first request (only this site's, not expired), its
// SHA-256 checked, and kept on disk until it expires; an unknown or expired
// id is 404. The id, 32 random bytes, is what keeps the URL unguessable.
package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
)

// PathPrefix is where the boot listener serves artifacts.
const PathPrefix = "/artifacts/"

// fetchTimeout bounds a fetch from the control plane, which outlives the
// request that started it.
const fetchTimeout = 5 * time.Minute

// validID is the form of an artifact id (store.ValidArtifactID):
// 32 bytes in unpadded lowercase base32.
var validID = regexp.MustCompile(`^[a-z2-7]{52}$`)

// Meta is what the control plane says of an artifact besides its bytes.
type Meta struct {
	Name      string    `json:"name"`
	SHA256    string    `json:"sha256"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// FetchFunc fetches an artifact of this site from the control plane:
// NOT_FOUND when it is unknown, another site's or expired.
type FetchFunc func(ctx context.Context, id string) (Meta, []byte, error)

// Cache holds fetched artifacts under a directory.
type Cache struct {
	dir   string
	fetch FetchFunc
	now   func() time.Time
	log   *slog.Logger
	// fetching makes concurrent first requests of an id share one fetch.
	fetching singleflight.Group
	// writing orders writes of fetched files with sweeps of expired ones.
	writing sync.Mutex
}

// New opens the cache at dir, deleting what expired while the agent was
// down.
func New(dir string, fetch FetchFunc, now func() time.Time, log *slog.Logger) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the artifacts dir %s", dir)
	}
	if now == nil {
		now = time.Now
	}
	c := &Cache{dir: dir, fetch: fetch, now: now, log: log}
	c.sweep()
	return c, nil
}

// sweep deletes what expired; the caller holds c.writing (or is New). It
// runs at each fetch too, so a long-running agent does not keep every
// ISO it ever served until its restart.
func (c *Cache) sweep() {
	metas, _ := filepath.Glob(filepath.Join(c.dir, "*.json"))
	for _, m := range metas {
		id := filepath.Base(m[:len(m)-len(".json")])
		if _, ok := c.cached(id); !ok {
			c.drop(id)
		}
	}
}

// Handler serves GET /artifacts/{id}/{name}, with ranges (BMCs read
// virtual media in ranges).
func (c *Cache) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPrefix+"{id}/{name}", c.serve)
	return mux
}

func (c *Cache) serve(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	if !validID.MatchString(id) {
		http.NotFound(w, r)
		return
	}
	m, err := c.get(r.Context(), id)
	switch {
	case errs.Is(err, errs.NotFound) || err == nil && m.Name != name:
		http.NotFound(w, r)
		return
	case err != nil:
		c.log.Warn("cannot serve an artifact", "id", id[:8]+"…", "err", err)
		http.Error(w, "better-compute: the artifact cannot be fetched from the control plane now; retry", http.StatusBadGateway)
		return
	}
	f, err := os.Open(c.path(id))
	if err != nil {
		http.Error(w, "better-compute: the cached artifact cannot be read", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, name, time.Time{}, f)
}

// get returns the artifact's meta once its bytes are on disk: from the
// cache, or fetched and checked once however many requests ask at once (a
// BMC reads an ISO in parallel ranges).
func (c *Cache) get(ctx context.Context, id string) (Meta, error) {
	if m, ok := c.cached(id); ok {
		return m, nil
	}
	v, err, _ := c.fetching.Do(id, func() (any, error) {
		// Not the first request's context: others wait on this fetch, and
		// a BMC closes range reads it no longer needs.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		return c.fetchAndKeep(ctx, id)
	})
	if err != nil {
		return Meta{}, err
	}
	return v.(Meta), nil
}

func (c *Cache) fetchAndKeep(ctx context.Context, id string) (Meta, error) {
	if m, ok := c.cached(id); ok { // kept by a fetch that just ended
		return m, nil
	}
	c.drop(id) // expired or half-written
	m, data, err := c.fetch(ctx, id)
	if err != nil {
		return Meta{}, err
	}
	sum := sha256.Sum256(data)
	if !bytes.Equal([]byte(hex.EncodeToString(sum[:])), []byte(m.SHA256)) {
		return Meta{}, errs.New(errs.DriverError, "the artifact's bytes do not match the SHA-256 the control plane gave (%s)", m.SHA256)
	}
	if !m.ExpiresAt.After(c.now()) {
		return Meta{}, errs.New(errs.NotFound, "the artifact expired")
	}
	b, _ := json.Marshal(m)
	c.writing.Lock()
	defer c.writing.Unlock()
	c.sweep()
	if err := atomicfile.Write(c.path(id), data, 0o600); err != nil {
		return Meta{}, err
	}
	if err := atomicfile.Write(c.path(id)+".json", b, 0o600); err != nil {
		return Meta{}, err
	}
	return m, nil
}

// cached returns the meta of a cached, unexpired artifact.
func (c *Cache) cached(id string) (Meta, bool) {
	b, err := os.ReadFile(c.path(id) + ".json")
	if err != nil {
		return Meta{}, false
	}
	var m Meta
	if json.Unmarshal(b, &m) != nil || !m.ExpiresAt.After(c.now()) {
		return Meta{}, false
	}
	if _, err := os.Stat(c.path(id)); err != nil {
		return Meta{}, false
	}
	return m, true
}

func (c *Cache) drop(id string) {
	_ = os.Remove(c.path(id) + ".json")
	_ = os.Remove(c.path(id))
}

func (c *Cache) path(id string) string { return filepath.Join(c.dir, id) }
