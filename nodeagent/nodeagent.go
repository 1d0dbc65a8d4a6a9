// Package nodeagent owns `bcd node`, the agent of an installed OS: it joins
// once with the single-use provisioned token its installer left (role node,
// a fresh key pair; the token file is removed after the join), keeps the
// node certificate and key in its data dir (0600), comes back from them
// alone after that, and renews the certificate before it expires. It talks
// to the control plane's agents listener (--control-plane) or to its site's
// relay (--site), which forwards its join (as it forwards ramdisks') and
// its renewals, so an installed machine that reaches only its site joins
// and stays joined.
package nodeagent

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/activities/site"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
	"github.com/better-compute/better-compute/pki"
)

// Files in the data dir. node.json is written last: its presence means a
// complete join.
const (
	KeyFile  = "key.pem"
	CertFile = "cert.pem"
	CAFile   = "ca.pem"
	NodeFile = "node.json"
)

const (
	joinOp         = "node.join"
	renewOp        = "node.renew"
	maxTokenLength = 512
	maxAnswer      = 1 << 20
)

// Config configures bcd node. Only mains fill it from flags.
type Config struct {
	// ControlPlaneURL is the control plane's agents listener (https://…);
	// SiteURL the site agent's relay listener (https://…), which forwards
	// the join and renewals, for a node of its site only. One of them is
	// needed; with both, the control plane is used.
	ControlPlaneURL, SiteURL string
	CAFile                   string // the project CA: checks the server, and saved at the join
	TokenFile                string // the provisioned token; needed only before the first join
	DataDir                  string
	// RenewCheckEvery is how often the certificate is checked for renewal
	// (after a check at start); an hour when zero.
	RenewCheckEvery time.Duration
	Now             func() time.Time // time.Now when nil
	Logger          *slog.Logger
}

// joined is node.json.
type joined struct {
	Identity string `json:"identity"`
	SiteID   string `json:"siteId"`
	TenantID string `json:"tenantId"`
}

// Agent is a joined bcd node.
type Agent struct {
	cfg            Config
	log            *slog.Logger
	key            crypto.Signer
	keyPEM         []byte
	cert           *x509.Certificate
	certPEM, caPEM []byte
	joined
}

// Run starts the agent and renews its certificate until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	a, err := startRetrying(ctx, cfg)
	if err != nil {
		return err
	}
	t := time.NewTicker(a.cfg.RenewCheckEvery)
	defer t.Stop()
	for {
		if err := a.RenewIfDue(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("cannot renew the node certificate; retrying at the next check. Once it expires, move the data dir away and install again",
				"err", err, "expires", a.cert.NotAfter, "nextCheck", a.cfg.RenewCheckEvery)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// startRetrying starts the agent, trying again while the control plane
// (or the site) cannot be reached: an installed machine may boot before
// its network or the control plane is up, and its token is still unused.
func startRetrying(ctx context.Context, cfg Config) (*Agent, error) {
	wait := time.Second
	for {
		a, err := Start(ctx, cfg)
		if !errs.Is(err, errs.Unavailable) {
			return a, err
		}
		if cfg.Logger != nil {
			cfg.Logger.Warn("cannot reach the control plane to start; retrying", "err", err, "in", wait)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// Start joins (first start only: the token file is then removed) or loads
// the stored certificate, and returns the agent.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the data dir %s", cfg.DataDir)
	}
	a := &Agent{cfg: cfg, log: cfg.Logger}
	_, err := os.Stat(filepath.Join(cfg.DataDir, NodeFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = a.join(ctx)
	case err == nil:
		if err = a.load(); err == nil {
			a.removeToken()
		}
	default:
		err = errs.Wrap(errs.Internal, err, "cannot read the data dir %s", cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	a.log.Info("node agent started", "node", a.Identity, "site", a.SiteID,
		"serial", a.cert.SerialNumber.Text(16), "notAfter", a.cert.NotAfter)
	return a, nil
}

func (c *Config) check() error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RenewCheckEvery <= 0 {
		c.RenewCheckEvery = time.Hour
	}
	switch {
	case c.DataDir == "":
		return errs.Invalid("data-dir", "bcd node needs --data-dir")
	case c.ControlPlaneURL == "" && c.SiteURL == "":
		return errs.Invalid("control-plane", "bcd node needs --control-plane or --site")
	case c.CAFile == "":
		return errs.Invalid("ca-file", "bcd node needs --ca-file, the project CA")
	}
	for _, u := range []struct{ flag, v string }{{"control-plane", c.ControlPlaneURL}, {"site", c.SiteURL}} {
		if p, err := url.Parse(u.v); u.v != "" && (err != nil || p.Scheme != "https" || p.Hostname() == "") {
			return errs.Invalid(u.flag, "--%s must be https://host:port", u.flag)
		}
	}
	return nil
}

// NodeID is the node the agent joined as (node_…).
func (a *Agent) NodeID() string { return a.Identity }

// Certificate is the agent's current certificate.
func (a *Agent) Certificate() *x509.Certificate { return a.cert }

// join exchanges the token and a fresh key for a node certificate, saves
// them and removes the token file.
func (a *Agent) join(ctx context.Context) error {
	token, err := readToken(a.cfg.TokenFile, a.cfg.DataDir)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(a.cfg.CAFile)
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "cannot read the CA file (--ca-file)")
	}
	key, keyPEM, err := pki.NewKey()
	if err != nil {
		return err
	}
	pubPEM, err := pki.MarshalPublicKey(key.Public())
	if err != nil {
		return err
	}
	req := &v1.JoinRequest{Token: token, Role: string(pki.RoleNode), PublicKeyPem: pubPEM}
	var resp *v1.JoinResponse
	if a.cfg.ControlPlaneURL != "" {
		resp, err = joinControlPlane(ctx, a.cfg.ControlPlaneURL, caPEM, req)
	} else {
		resp, err = joinSite(ctx, a.cfg.SiteURL, caPEM, req)
	}
	if err != nil {
		return err
	}
	a.key, a.keyPEM, a.caPEM = key, keyPEM, caPEM
	if err := a.adopt(resp.GetCertPem()); err != nil {
		return err
	}
	a.joined = joined{Identity: resp.GetIdentity(), SiteID: resp.GetSiteId(), TenantID: resp.GetTenantId()}
	if err := a.save(); err != nil {
		return err
	}
	a.removeToken()
	a.log.Info("joined as an installed machine", "node", a.Identity, "site", a.SiteID)
	return nil
}

// removeToken removes the token file once the data dir holds a join: after
// this join, or at a later start when an agent died before removing it (a
// token beside a join is used, or would never be).
func (a *Agent) removeToken() {
	if a.cfg.TokenFile == "" {
		return
	}
	if err := os.Remove(a.cfg.TokenFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.log.Warn("joined, but cannot remove the token file; remove it by hand (it admits nothing any more)", "file", a.cfg.TokenFile, "err", err)
	}
}

// readToken reads the single-use token; its error never holds it.
func readToken(path, dataDir string) (string, error) {
	if path == "" {
		return "", errs.Invalid("token-file", "%s holds no join yet: give the provisioned token file its installer wrote", dataDir)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", errs.Wrap(errs.InvalidInput, err, "cannot read the token file (--token-file)")
	}
	token := strings.TrimSpace(string(b))
	if _, kind, err := pki.ParseToken(token); err != nil || kind != pki.TokenProvisioned || len(token) > maxTokenLength {
		return "", errs.Invalid("token-file", "%s does not hold a provisioned join token (bcprov_…)", path)
	}
	return token, nil
}

// adopt checks that certPEM certifies our key as a node, from the CA.
func (a *Agent) adopt(certPEM []byte) error {
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return err
	}
	pool, err := pki.PoolFromPEM(a.caPEM)
	if err != nil {
		return err
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: a.cfg.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return errs.Wrap(errs.Unauthenticated, err, "the node certificate does not chain to the project CA")
	}
	td, err := pki.TrustDomainOfPEM(a.caPEM)
	if err != nil {
		return err
	}
	if role, _, err := pki.Identify(cert, td); err != nil || role != pki.RoleNode {
		return errs.New(errs.Unauthenticated, "the certificate is not a node's (role %s)", role)
	}
	if !bytes.Equal(mustPKIX(cert.PublicKey), mustPKIX(a.key.Public())) {
		return errs.New(errs.Unauthenticated, "the certificate certifies another key")
	}
	a.cert, a.certPEM = cert, certPEM
	return nil
}

func mustPKIX(pub crypto.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	return b
}

// save writes the key, certificate and CA (0600), then node.json.
func (a *Agent) save() error {
	jb, err := json.MarshalIndent(a.joined, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot encode %s", NodeFile)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{KeyFile, a.keyPEM}, {CertFile, a.certPEM}, {CAFile, a.caPEM}, {NodeFile, jb}} {
		if err := atomicfile.Write(filepath.Join(a.cfg.DataDir, f.name), f.data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// load reads a previous join from the data dir.
func (a *Agent) load() error {
	dir := a.cfg.DataDir
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{KeyFile, &a.keyPEM}, {CertFile, &a.certPEM}, {CAFile, &a.caPEM}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return errs.Wrap(errs.InvalidState, err, "%s is incomplete: move it away and install again", dir)
		}
		*f.dst = b
	}
	jb, err := os.ReadFile(filepath.Join(dir, NodeFile))
	if err == nil {
		err = json.Unmarshal(jb, &a.joined)
	}
	if err != nil {
		return errs.Wrap(errs.InvalidState, err, "cannot read %s", filepath.Join(dir, NodeFile))
	}
	if a.key, err = pki.ParseKey(a.keyPEM); err != nil {
		return err
	}
	if err := a.adopt(a.certPEM); err != nil {
		return errs.Wrap(errs.InvalidState, err, "the stored node certificate cannot be used (expired?): move %s away and install again", dir)
	}
	return nil
}

// renewDue reports whether less than a third of the certificate's life is
// left (as a site agent renews).
func (a *Agent) renewDue() bool {
	life := a.cert.NotAfter.Sub(a.cert.NotBefore)
	return a.cert.NotAfter.Sub(a.cfg.Now()) < life/3
}

// RenewIfDue renews the certificate when a third of its life is left.
func (a *Agent) RenewIfDue(ctx context.Context) error {
	if !a.renewDue() {
		return nil
	}
	return a.Renew(ctx)
}

// Renew asks for a fresh certificate for the same key over mutual TLS with
// the current one: from the control plane, or through the site's relay
// (which renews only a node of its site), and saves it.
func (a *Agent) Renew(ctx context.Context) error {
	renew := a.renewControlPlane
	if a.cfg.ControlPlaneURL == "" {
		renew = a.renewSite
	}
	resp, err := renew(ctx)
	if err != nil {
		return err
	}
	old := a.cert
	if err := a.adopt(resp.GetCertPem()); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(a.cfg.DataDir, CertFile), a.certPEM, 0o600); err != nil {
		return err
	}
	a.log.Info("renewed the node certificate", "node", a.Identity, "serial", a.cert.SerialNumber.Text(16),
		"notAfter", a.cert.NotAfter, "previousNotAfter", old.NotAfter)
	return nil
}

func (a *Agent) renewControlPlane(ctx context.Context) (*v1.JoinResponse, error) {
	hc, err := client(a.cfg.ControlPlaneURL, a.caPEM, a.certPEM, a.keyPEM, pki.RoleControlPlane)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	resp, err := bettercomputev1connect.NewJoinServiceClient(hc, a.cfg.ControlPlaneURL).Renew(ctx, connect.NewRequest(&v1.RenewRequest{}))
	if err != nil {
		return nil, site.FromConnect(renewOp, err)
	}
	return resp.Msg, nil
}

func (a *Agent) renewSite(ctx context.Context) (*v1.JoinResponse, error) {
	hc, err := client(a.cfg.SiteURL, a.caPEM, a.certPEM, a.keyPEM, pki.RoleSite)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	return postRelay(ctx, hc, a.cfg.SiteURL, "/v1/renew", nil, renewOp)
}

// client is an HTTP client checking the server (of role want) against
// the CA, presenting certPEM when given.
func client(base string, caPEM, certPEM, keyPEM []byte, want pki.Role) (*http.Client, error) {
	u, _ := url.Parse(base) // checked
	pool, err := pki.PoolFromPEM(caPEM)
	if err != nil {
		return nil, err
	}
	td, err := pki.TrustDomainOfPEM(caPEM)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "the CA file is not the project's CA")
	}
	tc, err := pki.ClientTLS(pool, certPEM, keyPEM, u.Hostname(), td, pki.Want{Roles: []pki.Role{want}})
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}, nil
}

func joinControlPlane(ctx context.Context, base string, caPEM []byte, req *v1.JoinRequest) (*v1.JoinResponse, error) {
	hc, err := client(base, caPEM, nil, nil, pki.RoleControlPlane)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	resp, err := bettercomputev1connect.NewJoinServiceClient(hc, base).Join(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, site.FromConnect(joinOp, err)
	}
	return resp.Msg, nil
}

// joinSite joins through the site agent's relay (POST /v1/join, protojson),
// which forwards it to the control plane over the site's mTLS client.
func joinSite(ctx context.Context, base string, caPEM []byte, req *v1.JoinRequest) (*v1.JoinResponse, error) {
	hc, err := client(base, caPEM, nil, nil, pki.RoleSite)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	body, err := protojson.Marshal(req)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "encode the join request")
	}
	return postRelay(ctx, hc, base, "/v1/join", body, joinOp)
}

// postRelay posts body to the site relay's path and decodes its
// JoinResponse, or its JSON error.
func postRelay(ctx context.Context, hc *http.Client, base, path string, body []byte, op string) (*v1.JoinResponse, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "build the request")
	}
	hr.Header.Set("Content-Type", "application/json")
	r, err := hc.Do(hr)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot reach the site's relay").WithOp(op)
	}
	defer r.Body.Close()
	out, err := io.ReadAll(io.LimitReader(r.Body, maxAnswer))
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot read the relay's answer").WithOp(op)
	}
	if r.StatusCode != http.StatusOK {
		var e struct{ Kind, Error string }
		if json.Unmarshal(out, &e) != nil || e.Kind == "" {
			return nil, errs.New(errs.Unavailable, "the site's relay answered %s", r.Status).WithOp(op)
		}
		return nil, errs.New(errs.Kind(e.Kind), "%s", e.Error).WithOp(op)
	}
	var resp v1.JoinResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(out, &resp); err != nil {
		return nil, errs.Wrap(errs.DriverError, err, "the relay's answer is not a JoinResponse").WithOp(op)
	}
	return &resp, nil
}
