// Package bodytimeout bounds how long an HTTP server waits for a request's
// body, so a client that trickles one holds a connection no longer than that.
// http.Server.ReadTimeout would too, but it also stays on the connection
// while a long handler runs (a long poll, an image stream) and cancels its
// context when it fires; this deadline is lifted once the body is read.
package bodytimeout

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Default is the time a request's body may take to arrive.
const Default = 30 * time.Second

// Handler gives each request's body d to arrive, then serves it with h.
func Handler(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r) // a writer without deadlines (a test recorder)
			return
		}
		r.Body = &body{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		h.ServeHTTP(w, r)
	})
}

// body lifts the deadline at the body's end.
type body struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}
