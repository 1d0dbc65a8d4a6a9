package redfish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/stmcginnis/gofish/common"
)

// session is one Redfish login: the session resource to DELETE at the end
// and the X-Auth-Token that stands for the credentials meanwhile.
type session struct {
	path  string
	token string
	// system is the ComputerSystem found with the session ("" until one
	// is): the next operation reads it at once instead of listing the
	// BMC's systems again.
	system string
}

// KeepSession is how long a session is kept for the next operation on its
// BMC after one ends: long enough for the commands a workflow sends back to
// back (set the boot device, then power on), shorter than the 30 seconds
// Redfish allows as the least SessionTimeout, so a kept session has not
// expired at the BMC unless the BMC restarted or dropped it. A BMC login
// takes a second or more on many real BMCs, and each one is a request its
// slow web service must serve.
const KeepSession = 20 * time.Second

// sessionKey names the sessions that may be shared: one BMC endpoint, one
// user and password (by hash: the cache holds no password), one TLS policy,
// so a session's token only travels over connections checked as the
// operation that opened it checked its own.
type sessionKey struct {
	endpoint, user string
	password       [sha256.Size]byte
	tls            bmc.TLS
}

func sessionKeyOf(addr bmc.Address, creds bmc.Credentials) sessionKey {
	return sessionKey{endpoint: addr.Endpoint(), user: creds.Username, password: sha256.Sum256([]byte(creds.Password)), tls: creds.TLS}
}

// keptSession is a session between operations, logged out when it has
// waited KeepSession unused.
type keptSession struct {
	s     *session
	d     *Driver // whose client logs it out
	timer *time.Timer
}

// kept holds at most one idle session per key. An operation takes its key's
// session out (so no two operations share one at once) and puts it back at
// its end; the site's BMC gate holds one conversation per BMC at a time, so
// one session per BMC serves all of a site agent's commands.
var kept = struct {
	mu sync.Mutex
	m  map[sessionKey]*keptSession
}{m: map[sessionKey]*keptSession{}}

// takeSession returns the kept session of key, if any, for the caller's
// use alone.
func takeSession(key sessionKey) *session {
	kept.mu.Lock()
	defer kept.mu.Unlock()
	ks := kept.m[key]
	if ks == nil {
		return nil
	}
	delete(kept.m, key)
	ks.timer.Stop() // if it fired, its logout finds another session (or none) under the key and leaves
	return ks.s
}

// keepSession puts s back for the next operation on its BMC, or logs it
// out when another is kept already.
func (d *Driver) keepSession(ctx context.Context, s *session) {
	kept.mu.Lock()
	if kept.m[d.key] != nil {
		kept.mu.Unlock()
		d.logout(ctx, s)
		return
	}
	ks := &keptSession{s: s, d: d}
	ks.timer = time.AfterFunc(KeepSession, func() { ks.expire(d.key) })
	kept.m[d.key] = ks
	kept.mu.Unlock()
}

// expire logs the session out if it is still the one kept under key.
func (ks *keptSession) expire(key sessionKey) {
	kept.mu.Lock()
	mine := kept.m[key] == ks
	if mine {
		delete(kept.m, key)
	}
	kept.mu.Unlock()
	if mine {
		ks.d.logout(context.Background(), ks.s)
	}
}

// LogoutAll logs out every session kept between operations, waiting up to
// ctx for the BMCs' answers: for a process about to stop, so it leaves
// none of a BMC's few session slots taken until its timeout.
func LogoutAll(ctx context.Context) {
	kept.mu.Lock()
	all := kept.m
	kept.m = map[sessionKey]*keptSession{}
	kept.mu.Unlock()
	var wg sync.WaitGroup
	for _, ks := range all {
		ks.timer.Stop()
		wg.Go(func() { ks.d.logout(ctx, ks.s) })
	}
	wg.Wait()
}

// Logout logs out the session kept for the driver's BMC (its user,
// password and TLS policy), if there is one, waiting up to ctx.
func (d *Driver) Logout(ctx context.Context) {
	if s := takeSession(d.key); s != nil {
		d.logout(ctx, s)
	}
}

// maxAnswer bounds what the driver reads of a login answer.
const maxAnswer = 1 << 20

// logoutTimeout bounds a logout, which may outlive its operation.
const logoutTimeout = 10 * time.Second

// login opens a session: it reads the service root (which needs no
// authentication) for its Sessions collection and POSTs the credentials
// there once. It returns nil, and the caller uses basic authentication,
// when the service lists no sessions or refuses the POST as not
// implemented. A rejected login is an error, never followed by a basic
// authentication try: each failed attempt counts towards the BMC's lockout.
func (d *Driver) login(ctx context.Context) (*session, error) {
	sessions, err := d.sessionsPath(ctx)
	if err != nil || sessions == "" {
		return nil, err
	}
	body, _ := json.Marshal(struct{ UserName, Password string }{d.creds.Username, d.creds.Password})
	resp, err := d.do(ctx, http.MethodPost, sessions, "", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated:
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		d.log.Info("redfish service has no sessions; using basic authentication", "status", resp.StatusCode)
		return nil, nil
	default:
		return nil, common.ConstructError(resp.StatusCode, answer)
	}
	s := &session{token: resp.Header.Get("X-Auth-Token"), path: resp.Header.Get("Location")}
	if u, err := url.Parse(s.path); err == nil && s.path != "" && strings.HasPrefix(u.RequestURI(), "/") {
		s.path = u.RequestURI() // an absolute Location names a host: the session is still on this BMC
	} else {
		var res struct {
			ID string `json:"@odata.id"`
		}
		_ = json.Unmarshal(answer, &res) // no id: the session is left to expire
		s.path = res.ID
	}
	if s.token == "" {
		return nil, common.ConstructError(resp.StatusCode, []byte("the BMC answered the session login with no X-Auth-Token"))
	}
	return s, nil
}

// sessionsPath reads the service root's Links.Sessions, "" when it has none.
func (d *Driver) sessionsPath(ctx context.Context) (string, error) {
	resp, err := d.do(ctx, http.MethodGet, "/redfish/v1/", "", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode != http.StatusOK {
		return "", common.ConstructError(resp.StatusCode, answer)
	}
	var root struct {
		Links struct {
			Sessions struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if err := json.Unmarshal(answer, &root); err != nil {
		return "", errors.New("the BMC's service root /redfish/v1/ is not JSON")
	}
	return root.Links.Sessions.ID, nil
}

// logout DELETEs the session. It runs when the operation ends, even one
// canceled or out of time, so it has a few seconds of its own: a session
// left open holds one of the few a BMC allows until it expires. The
// operation waits for it only while its own context lasts; past that the
// logout finishes in the background, so a slow BMC never keeps a call
// beyond its context (and its activity beyond its timeout).
func (d *Driver) logout(ctx context.Context, s *session) {
	if s.path == "" {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.deleteSession(ctx, s)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// deleteSession sends the logout, with up to logoutTimeout of its own.
func (d *Driver) deleteSession(ctx context.Context, s *session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	resp, err := d.do(ctx, http.MethodDelete, s.path, s.token, nil)
	if err != nil {
		d.log.Warn("redfish logout failed; the session expires on its own", "err", err)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		d.log.Warn("redfish logout refused; the session expires on its own", "status", resp.StatusCode)
	}
}

// do sends one request to the BMC, with token as X-Auth-Token when given.
func (d *Driver) do(ctx context.Context, method, path, token string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, d.addr.Endpoint()+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	return d.http.Do(req)
}
