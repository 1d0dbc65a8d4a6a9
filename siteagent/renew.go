package siteagent

import (
	"bytes"
	"context"
	"crypto/x509"
	"path/filepath"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/activities/site"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
	"github.com/better-compute/better-compute/pki"
)

const renewOp = "site.renew"

// startRenewal runs the renewal loop until Stop: a check at once, then one
// every Config.RenewCheckEvery. A failed renewal is logged and retried at
// the next check; it never stops the agent. The loop also announces the
// agent (announce) until the control plane took it.
func (a *Agent) startRenewal() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopRenewal, a.renewalDone = cancel, make(chan struct{})
	go func() {
		defer close(a.renewalDone)
		t := time.NewTicker(a.cfg.RenewCheckEvery)
		defer t.Stop()
		announced := false
		for {
			if !announced { // at start, and at each check until the control plane took it
				err := a.announce(ctx)
				announced = err == nil
				if err != nil && ctx.Err() == nil {
					a.log.Warn("cannot announce this agent's BMC drivers to the control plane; retrying at the next check", "err", err)
				}
			}
			if err := a.renewIfDue(ctx); err != nil && ctx.Err() == nil {
				leaf := a.id.certs.leaf()
				a.log.Error("cannot renew the site agent's certificate; retrying at the next check. "+
					"Check that the control plane is reachable and the site not revoked; once the certificate expires, "+
					"move the data dir away and join again with a new site token",
					"err", err, "expires", leaf.NotAfter, "nextCheck", a.cfg.RenewCheckEvery)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// renewDue reports whether less than a third of leaf's lifetime is left.
func renewDue(leaf *x509.Certificate, now time.Time) bool {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotAfter.Sub(now) < life/3
}

// renewIfDue renews the agent's certificates when due: it asks the control
// plane over its current mTLS client, writes the new certificates to the
// data dir and makes the live TLS configs present them.
func (a *Agent) renewIfDue(ctx context.Context) error {
	old := a.id.certs.leaf()
	if !renewDue(old, a.cfg.Now()) {
		return nil
	}
	return a.renew(ctx)
}

// renew renews the agent's certificates, and takes its tenant's current
// payload key and Temporal's current frontends from the answer.
func (a *Agent) renew(ctx context.Context) error {
	old := a.id.certs.leaf()
	jc := bettercomputev1connect.NewJoinServiceClient(a.cp, a.cfg.ControlPlaneURL)
	resp, err := jc.Renew(ctx, connect.NewRequest(&v1.RenewRequest{ServeHosts: []string{a.relayHost}}))
	if err != nil {
		return site.FromConnect(renewOp, err)
	}
	r := resp.Msg
	leaf, err := a.checkRenewal(r)
	if err != nil {
		return err
	}
	// Both pair with the key before anything is written or switched.
	certs, err := newLiveCerts(a.id.keyPEM, r.CertPem, r.ServingCertPem, a.id.caPEM)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{ServingFile, r.ServingCertPem}, {CertFile, r.CertPem}} {
		if err := atomicfile.Write(filepath.Join(a.cfg.DataDir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	a.id.certs.replace(certs)
	// Pooled connections still present the old certificate: let the next
	// calls open new ones.
	a.cp.CloseIdleConnections()
	a.log.Info("renewed the site agent's certificate", "site", a.id.SiteID,
		"serial", leaf.SerialNumber.Text(16), "notAfter", leaf.NotAfter, "previousNotAfter", old.NotAfter)
	if err := a.keepFrontends(r); err != nil {
		return err
	}
	return a.keepCodecKey(r.GetCodecKey())
}

// checkRenewal checks that a renewal answer certifies this agent: our key,
// our site, from our CA, with a serving certificate.
func (a *Agent) checkRenewal(r *v1.JoinResponse) (*x509.Certificate, error) {
	if len(r.GetCertPem()) == 0 || len(r.GetServingCertPem()) == 0 {
		return nil, errs.New(errs.Internal, "the control plane's renewal lacks a certificate or a serving certificate").WithOp(renewOp)
	}
	leaf, err := pki.ParseCert(r.CertPem)
	if err != nil {
		return nil, err
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: a.id.caPool, CurrentTime: a.cfg.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "the renewed certificate does not chain to the project CA").WithOp(renewOp)
	}
	role, id, err := pki.Identify(leaf, a.id.trustDomain)
	if err != nil || role != pki.RoleSite || id != a.id.Identity {
		return nil, errs.New(errs.Internal, "the renewed certificate is for %s %s, not site %s", role, id, a.id.Identity).WithOp(renewOp)
	}
	if ca := r.GetCaPem(); len(ca) > 0 && !bytes.Equal(bytes.TrimSpace(ca), bytes.TrimSpace(a.id.caPEM)) {
		a.log.Warn("the control plane renewed with another CA than the agent joined with; keeping the joined CA", "site", a.id.SiteID)
	}
	return leaf, nil
}
