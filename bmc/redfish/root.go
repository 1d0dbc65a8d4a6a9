package redfish

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// serviceRootTTL is how long a BMC's service root is answered from memory.
// gofish reads the service root at the start of every operation (and the
// login reads it again for its Links.Sessions): a request of each
// operation's few, on BMCs whose web service takes 50-500 ms an answer. The
// root is public (it needs no credentials), says where the collections are,
// and changes only when the BMC's firmware does; its content is never
// trusted for more than finding paths, so a minute-old copy is as good.
const serviceRootTTL = time.Minute

// maxRoot bounds a service root kept in memory; a larger one is not kept.
const maxRoot = 256 << 10

// sweepAt is how many roots are kept before the expired ones are dropped
// (a site agent drives thousands of BMCs; a root is a few KiB).
const sweepAt = 1024

// rootCache answers GET /redfish/v1/ from what the BMC answered last, for
// serviceRootTTL, and passes every other request to rt. It is shared by
// the drivers of one TLS policy (transportFor), so a copy was fetched over
// a connection checked as the caller's own would be.
type rootCache struct {
	rt  http.RoundTripper
	now func() time.Time

	mu   sync.Mutex
	kept map[string]keptRoot // by scheme://host:port
}

type keptRoot struct {
	body   []byte
	header http.Header
	at     time.Time
}

func newRootCache(rt http.RoundTripper) *rootCache {
	return &rootCache{rt: rt, now: time.Now, kept: map[string]keptRoot{}}
}

func isServiceRoot(req *http.Request) bool {
	p := req.URL.Path
	return req.Method == http.MethodGet && req.URL.RawQuery == "" && (p == "/redfish/v1/" || p == "/redfish/v1")
}

func (c *rootCache) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.URL.Scheme + "://" + req.URL.Host
	if !isServiceRoot(req) {
		resp, err := c.rt.RoundTrip(req)
		if err != nil || resp.StatusCode == http.StatusNotFound {
			c.forget(key) // unreachable, or a path the root gave is gone: read it afresh next time
		}
		return resp, err
	}
	c.mu.Lock()
	k, ok := c.kept[key]
	if ok && c.now().Sub(k.at) >= serviceRootTTL {
		delete(c.kept, key)
		ok = false
	}
	c.mu.Unlock()
	if ok {
		return k.response(req), nil
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRoot+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	k = keptRoot{body: body, header: resp.Header.Clone(), at: c.now()}
	if len(body) <= maxRoot {
		c.mu.Lock()
		if len(c.kept) >= sweepAt {
			for h, old := range c.kept {
				if k.at.Sub(old.at) >= serviceRootTTL {
					delete(c.kept, h)
				}
			}
		}
		c.kept[key] = k
		c.mu.Unlock()
	}
	return k.response(req), nil
}

func (c *rootCache) forget(key string) {
	c.mu.Lock()
	delete(c.kept, key)
	c.mu.Unlock()
}

// response is a fresh 200 answer to req with the kept root.
func (k keptRoot) response(req *http.Request) *http.Response {
	return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: k.header.Clone(), Body: io.NopCloser(bytes.NewReader(k.body)), ContentLength: int64(len(k.body)), Request: req}
}
