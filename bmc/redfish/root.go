package redfish

import (
	"bytes"
	"io"
	"net/http"
	"time"

	keptmap "github.com/better-compute/better-compute/internal/kept"
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

// rootCache answers GET /redfish/v1/ from what the BMC answered last, for
// serviceRootTTL, and passes every other request to rt. It is shared by
// the drivers of one TLS policy (transportFor), so a copy was fetched over
// a connection checked as the caller's own would be.
type rootCache struct {
	rt   http.RoundTripper
	kept *keptmap.Map[string, keptRoot] // by scheme://host:port
}

type keptRoot struct {
	body   []byte
	header http.Header
}

func newRootCache(rt http.RoundTripper) *rootCache {
	return &rootCache{rt: rt, kept: &keptmap.Map[string, keptRoot]{TTL: serviceRootTTL}}
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
			c.kept.Forget(key) // unreachable, or a path the root gave is gone: read it afresh next time
		}
		return resp, err
	}
	if k, ok := c.kept.Get(key); ok {
		return k.response(req), nil
	}
	at := c.kept.Clock()
	resp, err := c.rt.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRoot+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	k := keptRoot{body: body, header: resp.Header.Clone()}
	if len(body) <= maxRoot {
		c.kept.Put(key, k, at)
	}
	return k.response(req), nil
}

// response is a fresh 200 answer to req with the kept root.
func (k keptRoot) response(req *http.Request) *http.Response {
	return &http.Response{Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: k.header.Clone(), Body: io.NopCloser(bytes.NewReader(k.body)), ContentLength: int64(len(k.body)), Request: req}
}
