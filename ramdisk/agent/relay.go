package agent

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	bcv1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
)

// relay speaks to the site agent's relay listener: join with the discovery
// token, then long-poll for commands and post progress and results over mTLS.
type relay struct {
	site    string // https://host:port
	host    string // the name the relay's certificate must carry
	pin     []byte // SHA-256 of the CA certificate's DER
	key     crypto.Signer
	certPEM []byte
	http    *http.Client
	// siteID is the site the join admitted the ramdisk to: from then on
	// only that site's certificate is a relay ("" before, any site's).
	siteID string
}

func newRelay(b Boot, key crypto.Signer) *relay {
	u, _ := url.Parse(b.Site) // ParseCmdline checked it
	r := &relay{site: b.Site, host: u.Hostname(), pin: b.CAFingerprint, key: key}
	tlsCfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is checked by verifyPinned against the CA named by bc.ca,
		// the only trust anchor a freshly booted ramdisk has.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection:   r.verifyPinned,
	}
	r.http = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}}
	return r
}

// verifyPinned accepts the relay's chain when it contains the CA whose DER
// hashes to the pin, the leaf chains to that CA for the relay's host name,
// and the leaf is a site's (the ramdisk's own site's once joined): any
// other certificate of the CA, a control plane's or another site's, is not
// a relay.
func (r *relay) verifyPinned(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errs.New(errs.Unauthenticated, "the relay presented no certificate")
	}
	roots := x509.NewCertPool()
	inter := x509.NewCertPool()
	var pinned *x509.Certificate
	for _, c := range cs.PeerCertificates[1:] {
		if sum := sha256.Sum256(c.Raw); bytes.Equal(sum[:], r.pin) && c.IsCA {
			roots.AddCert(c)
			pinned = c
			continue
		}
		inter.AddCert(c)
	}
	if pinned == nil {
		return errs.New(errs.Unauthenticated, "the relay's chain does not contain the CA named by bc.ca (%x); is this the right site?", r.pin)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: r.host,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return errs.Wrap(errs.Unauthenticated, err, "the relay's certificate does not verify against the pinned CA")
	}
	td, err := pki.TrustDomainOf(pinned)
	if err != nil {
		return err
	}
	return pki.CheckPeer(cs.PeerCertificates[0], td, r.relayWant())
}

// relayWant is who a relay must be: a site, the ramdisk's own once joined.
func (r *relay) relayWant() pki.Want {
	return pki.Want{Roles: []pki.Role{pki.RoleSite}, Identity: r.siteID}
}

// join exchanges the discovery token and the public key for a certificate
// and switches the client to mTLS with it. It returns the issued identity.
func (r *relay) join(ctx context.Context, token pki.Token) (string, error) {
	pubPEM, err := pki.MarshalPublicKey(r.key.Public())
	if err != nil {
		return "", err
	}
	body, err := protojson.Marshal(&bcv1.JoinRequest{Token: string(token), Role: string(pki.RoleRamdisk), PublicKeyPem: pubPEM})
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "encode the join request")
	}
	out, err := r.do(ctx, http.MethodPost, "/v1/join", body, http.StatusOK)
	if err != nil {
		return "", err
	}
	var resp bcv1.JoinResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(out, &resp); err != nil {
		return "", errs.Wrap(errs.DriverError, err, "the relay's join response is not a JoinResponse")
	}
	if resp.GetSiteId() == "" {
		return "", errs.New(errs.DriverError, "the relay's join response names no site; the ramdisk cannot tell its site's relay from another")
	}
	r.siteID = resp.GetSiteId()
	if err := r.adopt(resp.GetCertPem(), resp.GetCaPem()); err != nil {
		return "", err
	}
	return resp.GetIdentity(), nil
}

// adopt checks the issued certificate (it must certify our key) and the CA
// (it must be the pinned one), and makes the client present the certificate.
func (r *relay) adopt(certPEM, caPEM []byte) error {
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return errs.Wrap(errs.DriverError, err, "the relay issued an unreadable certificate")
	}
	if !publicKeysEqual(cert.PublicKey, r.key.Public()) {
		return errs.New(errs.DriverError, "the relay issued a certificate for another key")
	}
	blk, _ := pem.Decode(caPEM)
	if blk == nil {
		return errs.New(errs.DriverError, "the join response carries no CA certificate")
	}
	if sum := sha256.Sum256(blk.Bytes); !bytes.Equal(sum[:], r.pin) {
		return errs.New(errs.Unauthenticated, "the join response's CA is not the one named by bc.ca")
	}
	pool, err := pki.PoolFromPEM(caPEM)
	if err != nil {
		return err
	}
	keyPEM, err := pki.MarshalPrivateKey(r.key)
	if err != nil {
		return err
	}
	td, err := pki.TrustDomainOfPEM(caPEM)
	if err != nil {
		return err
	}
	tlsCfg, err := pki.ClientTLS(pool, certPEM, keyPEM, r.host, td, r.relayWant())
	if err != nil {
		return err
	}
	r.certPEM = certPEM
	joined := r.http
	r.http = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}}
	// The join's connection, without a client certificate, serves nothing
	// more: closed now, not left idle at the relay for the transport's 90 s
	// (a site agent held one per ramdisk boot).
	joined.CloseIdleConnections()
	return nil
}

// next long-polls for a command; nil when the relay had none within wait.
// The header is the answer's: its traceparent names the site's span of the
// command.
func (r *relay) next(ctx context.Context, wait time.Duration) (*kinds.Command, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+30*time.Second)
	defer cancel()
	out, h, err := r.doHeader(ctx, http.MethodGet, "/v1/commands/next?wait="+wait.String(), nil, http.StatusOK, http.StatusNoContent)
	if err != nil || len(out) == 0 {
		return nil, nil, err
	}
	var c kinds.Command
	if err := json.Unmarshal(out, &c); err != nil {
		return nil, nil, errs.Wrap(errs.DriverError, err, "the relay sent a command that is not JSON")
	}
	return &c, h, nil
}

func (r *relay) progress(ctx context.Context, p kinds.Progress) error {
	return r.postJSON(ctx, "/v1/commands/"+url.PathEscape(p.CommandID)+"/progress", p)
}

func (r *relay) result(ctx context.Context, res kinds.Result) error {
	return r.postJSON(ctx, "/v1/commands/"+url.PathEscape(res.CommandID)+"/result", res)
}

func (r *relay) postJSON(ctx context.Context, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode %s", path)
	}
	_, err = r.do(ctx, http.MethodPost, path, b, http.StatusOK, http.StatusAccepted, http.StatusNoContent)
	return err
}

// do sends one request. A transport failure or a 5xx/429 answer is
// UNAVAILABLE (retry); other unexpected statuses map to final kinds.
func (r *relay) do(ctx context.Context, method, path string, body []byte, ok ...int) ([]byte, error) {
	out, _, err := r.doHeader(ctx, method, path, body, ok...)
	return out, err
}

// doHeader is do, returning the answer's header too.
func (r *relay) doHeader(ctx context.Context, method, path string, body []byte, ok ...int) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.site+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, errs.Wrap(errs.Internal, err, "build request %s %s", method, path)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, nil, errs.Wrap(errs.Unavailable, err, "%s %s on the site relay", method, pathOnly(path))
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, errs.Wrap(errs.Unavailable, err, "read the answer to %s %s", method, pathOnly(path))
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return out, resp.Header, nil
		}
	}
	return nil, nil, statusError(method, pathOnly(path), resp.StatusCode, out)
}

// statusError turns a non-success answer into an error. The relay says the
// kind in its JSON body ({"kind", "error"}); other servers (the image cache
// behind a proxy) only have the status, read as HTTP means it.
func statusError(method, path string, code int, body []byte) error {
	var relayErr struct {
		Kind  string `json:"kind"`
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &relayErr) == nil && relayErr.Kind != "" {
		return errs.New(errs.Kind(relayErr.Kind), "%s %s: the relay answered %d: %s", method, path, code, relayErr.Error)
	}
	kind := errs.DriverError
	switch {
	case code == http.StatusTooManyRequests || code >= 500:
		kind = errs.Unavailable
	case code == http.StatusBadRequest:
		kind = errs.InvalidInput
	case code == http.StatusUnauthorized:
		kind = errs.Unauthenticated
	case code == http.StatusForbidden:
		kind = errs.PermissionDenied
	case code == http.StatusNotFound:
		kind = errs.NotFound
	case code == http.StatusConflict:
		kind = errs.InvalidState
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return errs.New(kind, "%s %s: the relay answered %d %s", method, path, code, msg)
}

func pathOnly(p string) string { s, _, _ := strings.Cut(p, "?"); return s }

func publicKeysEqual(a, b crypto.PublicKey) bool {
	x, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && x.Equal(b)
}

// retryable reports whether a relay call may succeed if tried again.
func retryable(err error) bool { return errs.Is(err, errs.Unavailable) }

// backoff doubles a delay from 200ms up to max.
type backoff struct {
	cur, max time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = 200 * time.Millisecond
	}
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
