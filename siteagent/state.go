package siteagent

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/activities/site"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
	"github.com/better-compute/better-compute/pki"
)

// Files in the data dir.
const (
	KeyFile        = "agent.key"   // the agent's private key, 0600
	CertFile       = "agent.crt"   // its client certificate
	ServingFile    = "serving.crt" // its relay's serving certificate
	CAFileName     = "ca.crt"      // the project CA
	JoinFile       = "join.json"   // Temporal settings and codec key, 0600; written last
	BootTableFile  = "boot.json"   // the boot table
	CacheDirName   = "cache"       // the image cache
	joinOp         = "site.join"
	maxTokenLength = 512
)

// joined is what a join leaves in join.json.
type joined struct {
	Identity string `json:"identity"`
	SiteID   string `json:"siteId"`
	TenantID string `json:"tenantId"`
	// TemporalAddresses are the frontends the worker balances over;
	// TemporalAddress is the first, all that joins from before them hold.
	TemporalAddress   string   `json:"temporalAddress"`
	TemporalAddresses []string `json:"temporalAddresses,omitempty"`
	TemporalNamespace string   `json:"temporalNamespace"`
	TaskQueue         string   `json:"taskQueue"`
	CodecKey          []byte   `json:"codecKey"`
	// OldCodecKeys are the payload keys held before CodecKey (the shared
	// key of before per-tenant keys, a rotation's old ones): they still
	// decrypt what was sent under them.
	OldCodecKeys [][]byte `json:"oldCodecKeys,omitempty"`
	// TemporalTLS: the worker dials Temporal over mutual TLS with the
	// agent's certificate, checking the frontend under TemporalServerName
	// ("" means the host of TemporalAddress).
	TemporalTLS        bool   `json:"temporalTls,omitempty"`
	TemporalServerName string `json:"temporalServerName,omitempty"`
}

// identity is the agent's trust material, loaded from the data dir.
type identity struct {
	mu sync.Mutex // guards joined's codec keys, which a renewal changes
	joined
	keyPEM, certPEM, servingPEM, caPEM []byte
	caPool                             *x509.CertPool
	trustDomain                        string
	caFingerprint                      string // sha256 hex of the CA's DER
	// certs are the certificates the live TLS configs present; a renewal
	// replaces them.
	certs *liveCerts
}

// loadOrJoin loads the agent's identity from the data dir, joining first
// when the data dir holds none. relayHost goes into the serving certificate.
func loadOrJoin(ctx context.Context, cfg *Config, relayHost string) (*identity, error) {
	key, err := pki.LoadOrCreateKey(filepath.Join(cfg.DataDir, KeyFile), pki.NewKey)
	if err != nil {
		return nil, err
	}
	_, err = os.Stat(filepath.Join(cfg.DataDir, JoinFile))
	if errors.Is(err, fs.ErrNotExist) {
		if err := join(ctx, cfg, key, relayHost); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read the data dir %s", cfg.DataDir)
	}
	return loadIdentity(cfg.DataDir)
}

// join exchanges the site token for certificates and settings and saves
// them; join.json is written last, so its presence means a complete join.
func join(ctx context.Context, cfg *Config, key crypto.Signer, relayHost string) error {
	if cfg.TokenFile == "" {
		return errs.Invalid("token-file", "%s holds no join yet: give the site token file (better-compute site-tokens create --out …)", cfg.DataDir)
	}
	tok, err := os.ReadFile(cfg.TokenFile)
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "cannot read the site token file")
	}
	token := strings.TrimSpace(string(tok))
	if token == "" || len(token) > maxTokenLength {
		return errs.Invalid("token-file", "the site token file %s is empty or not a token", cfg.TokenFile)
	}
	pubPEM, err := pki.MarshalPublicKey(key.Public())
	if err != nil {
		return err
	}
	hc, err := controlPlaneClient(cfg, nil)
	if err != nil {
		return err
	}
	jc := bettercomputev1connect.NewJoinServiceClient(hc, cfg.ControlPlaneURL)
	resp, err := jc.Join(ctx, connect.NewRequest(&v1.JoinRequest{
		Token: token, Role: string(pki.RoleSite), PublicKeyPem: pubPEM, ServeHosts: []string{relayHost},
	}))
	if err != nil {
		return unreached(site.FromConnect(joinOp, err), cfg.ControlPlaneURL)
	}
	return saveJoin(cfg, resp.Msg)
}

// unreached names the control plane and its flag in an UNAVAILABLE
// error: the join's dial failed, not the join.
func unreached(err error, url string) error {
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Unavailable {
		return err
	}
	return e.WithMsg("cannot reach the control plane at " + url + " (check --control-plane): " + e.Msg)
}

func saveJoin(cfg *Config, r *v1.JoinResponse) error {
	if len(r.GetCertPem()) == 0 || len(r.GetServingCertPem()) == 0 || len(r.GetCodecKey()) != 32 ||
		r.GetSiteId() == "" || len(frontendsOf(r)) == 0 {
		return errs.New(errs.Internal, "the control plane's join response lacks a certificate, a serving certificate, the site, the Temporal address or the codec key").WithOp(joinOp)
	}
	caPEM := r.GetCaPem()
	if len(caPEM) == 0 {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return errs.Wrap(errs.InvalidInput, err, "cannot read the CA file")
		}
		caPEM = b
	}
	j := joined{
		Identity: r.GetIdentity(), SiteID: r.GetSiteId(), TenantID: r.GetTenantId(),
		TemporalAddress: frontendsOf(r)[0], TemporalAddresses: frontendsOf(r), TemporalNamespace: r.GetTemporalNamespace(),
		TaskQueue: r.GetTaskQueue(), CodecKey: r.GetCodecKey(),
		TemporalTLS: r.GetTemporalTls(), TemporalServerName: r.GetTemporalServerName(),
	}
	jb, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot encode the join settings")
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{CertFile, r.GetCertPem(), 0o644}, {ServingFile, r.GetServingCertPem(), 0o644},
		{CAFileName, caPEM, 0o644}, {JoinFile, jb, 0o600},
	} {
		if err := atomicfile.Write(filepath.Join(cfg.DataDir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// frontendsOf are the Temporal frontends of a join or renewal answer: all
// of them, or the one a control plane from before temporal_addresses gave.
func frontendsOf(r *v1.JoinResponse) []string {
	if len(r.GetTemporalAddresses()) > 0 {
		return r.GetTemporalAddresses()
	}
	if r.GetTemporalAddress() != "" {
		return []string{r.GetTemporalAddress()}
	}
	return nil
}

// frontends are the Temporal frontends the worker dials: those of the
// join or the last renewal, or the one a join from before them saved.
func (j *joined) frontends() []string {
	if len(j.TemporalAddresses) > 0 {
		return j.TemporalAddresses
	}
	return []string{j.TemporalAddress}
}

// loadIdentity reads the agent's trust material and settings.
func loadIdentity(dir string) (*identity, error) {
	id := &identity{}
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{KeyFile, &id.keyPEM}, {CertFile, &id.certPEM}, {ServingFile, &id.servingPEM}, {CAFileName, &id.caPEM}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, errs.Wrap(errs.InvalidState, err, "%s is incomplete: move it away and join again with a new site token", dir)
		}
		*f.dst = b
	}
	jb, err := os.ReadFile(filepath.Join(dir, JoinFile))
	if err == nil {
		err = json.Unmarshal(jb, &id.joined)
	}
	if err != nil {
		return nil, errs.Wrap(errs.InvalidState, err, "cannot read %s", filepath.Join(dir, JoinFile))
	}
	if id.caPool, err = pki.PoolFromPEM(id.caPEM); err != nil {
		return nil, err
	}
	ca, err := pki.ParseCert(id.caPEM)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(ca.Raw)
	id.caFingerprint = hex.EncodeToString(sum[:])
	leaf, err := pki.ParseCert(id.certPEM)
	if err != nil {
		return nil, err
	}
	if id.trustDomain, err = pki.TrustDomainOf(ca); err != nil {
		return nil, err
	}
	if role, _, err := pki.Identify(leaf, id.trustDomain); err != nil || role != pki.RoleSite {
		return nil, errs.New(errs.InvalidState, "the agent's certificate is not a site agent's")
	}
	if id.certs, err = newLiveCerts(id.keyPEM, id.certPEM, id.servingPEM, id.caPEM); err != nil {
		return nil, errs.Wrap(errs.InvalidState, err, "%s: move it away and join again with a new site token", dir)
	}
	return id, nil
}

// controlPlaneClient returns an HTTP client that verifies the control plane
// against the CA (cfg.CAFile before the join, the saved CA after) and,
// after the join, presents the agent's current certificate.
func controlPlaneClient(cfg *Config, id *identity) (*http.Client, error) {
	u, err := url.Parse(cfg.ControlPlaneURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, errs.Invalid("control-plane-url", "the control plane URL must be https://host:port")
	}
	var tc *tls.Config
	if id != nil {
		tc, err = id.certs.clientTLS(id.caPool, u.Hostname(), id.trustDomain)
	} else {
		b, rerr := os.ReadFile(cfg.CAFile)
		if rerr != nil {
			return nil, errs.Wrap(errs.InvalidInput, rerr, "cannot read the CA file (--ca-file)")
		}
		pool, perr := pki.PoolFromPEM(b)
		if perr != nil {
			return nil, perr
		}
		td, terr := pki.TrustDomainOfPEM(b)
		if terr != nil {
			return nil, errs.Wrap(errs.InvalidInput, terr, "the CA file (--ca-file) is not the project's CA")
		}
		tc, err = pki.ClientTLS(pool, nil, nil, u.Hostname(), td, controlPlane)
	}
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}, nil
}
