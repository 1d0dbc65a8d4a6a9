package webui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// SessionCookie is the cookie that carries a Web UI session.
const SessionCookie = "bc_ui_session"

// session is what a cookie proves: a login with an API token of tenant, until
// expires. It is signed, not stored: every serve process sharing the key
// accepts it, and it lives no longer than its token (checked on each request).
type session struct {
	tenant  string
	tokenID string
	expires time.Time
}

// SessionKey derives the key that signs sessions from a secret the control
// plane already holds (its codec key), so the secret itself signs nothing.
func SessionKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("better-compute web UI session key v1"))
	return m.Sum(nil)
}

// sign encodes s as base64url(tenant \n tokenID \n expiry).base64url(mac).
// Tenant and token ids hold no line break (the API checks every id's shape).
func (s session) sign(key []byte) string {
	body := s.tenant + "\n" + s.tokenID + "\n" + strconv.FormatInt(s.expires.Unix(), 10)
	return b64.EncodeToString([]byte(body)) + "." + b64.EncodeToString(mac(key, body))
}

// parseSession checks a cookie's signature and expiry.
func parseSession(key []byte, cookie string, now time.Time) (session, error) {
	enc, sig, ok := strings.Cut(cookie, ".")
	body, err1 := b64.DecodeString(enc)
	got, err2 := b64.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(got, mac(key, string(body))) {
		return session{}, errs.New(errs.Unauthenticated, "the Web UI session is not valid: log in again")
	}
	f := strings.Split(string(body), "\n")
	if len(f) != 3 {
		return session{}, errs.New(errs.Unauthenticated, "the Web UI session is not valid: log in again")
	}
	exp, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return session{}, errs.New(errs.Unauthenticated, "the Web UI session expired: log in again")
	}
	return session{tenant: f[0], tokenID: f[1], expires: time.Unix(exp, 0)}, nil
}

func mac(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("session\n" + body))
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding
