package controlplane

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/bodytimeout"
	"github.com/better-compute/better-compute/pki"
)

// loadCA loads the project's CA; without one, agents cannot join and wipes
// cannot be verified, which the banner says.
func loadCA(dir string) (*pki.CA, error) {
	ca, err := pki.Load(dir)
	if errs.Is(err, errs.NotFound) {
		return nil, nil
	}
	return ca, err
}

// startAgents serves JoinService and SecretsService over TLS with a serving
// certificate from the CA; client certificates are verified when sent.
func (cp *ControlPlane) startAgents() error {
	if cp.ln.agents == nil { // no CA, or --agents-listen off (listen)
		return nil
	}
	host, _, _ := net.SplitHostPort(cp.cfg.AgentsListen) // checked by listen
	certPEM, err := cp.ca.IssueServer(cp.key.Public(), pki.RoleControlPlane, "control-plane", servingHosts(host), pki.MaxTTL)
	if err != nil {
		return err
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return err
	}
	tlsCfg := api.AgentsTLS(cp.ca)
	tlsCfg.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Raw, cp.ca.Certificate().Raw}, PrivateKey: cp.key, Leaf: cert}}
	// Temporal: a site's BMC status reports are relayed to workflows as signals.
	srv := api.New(api.Config{Store: cp.store, Temporal: cp.client, Logger: cp.log})
	agents := api.Agents{CA: cp.ca, TemporalAddresses: cp.TemporalAddresses(), TemporalNamespace: cp.cfg.TemporalNamespace, CodecKey: cp.tenantCodecKey}
	if cp.temporal != nil && cp.temporal.TLSServerName() != "" {
		agents.TemporalTLS, agents.TemporalServerName = true, cp.temporal.TLSServerName()
	}
	agents.ReservedHosts = cp.reservedHosts(host, agents.TemporalServerName)
	cp.agents = &http.Server{Handler: bodytimeout.Handler(srv.AgentsHandler(agents), bodytimeout.Default), TLSConfig: tlsCfg,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	ln := take(&cp.ln.agents)
	cp.agentsURL = "https://" + ln.Addr().String()
	go func() {
		if err := cp.agents.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cp.log.Error("agents' listener stopped", "err", err)
		}
	}()
	return nil
}

// reservedHosts are the names and addresses of the agents' listener and of
// Temporal's frontends, which no site's serving certificate may name.
func (cp *ControlPlane) reservedHosts(agentsHost, temporalName string) []string {
	hosts := servingHosts(agentsHost)
	for _, a := range cp.TemporalAddresses() {
		if h, _, err := net.SplitHostPort(a); err == nil {
			hosts = append(hosts, servingHosts(h)...)
		}
	}
	if temporalName != "" {
		hosts = append(hosts, temporalName)
	}
	return hosts
}

// AgentsURL is the agents' TLS listener ("" without a CA).
func (cp *ControlPlane) AgentsURL() string { return cp.agentsURL }

// CAFile is the CA certificate agents verify the control plane with.
func (cp *ControlPlane) CAFile() string { return filepath.Join(cp.cfg.PKIDir, "ca.crt") }

// uiOrigins are the Web UI's origins, allowed to call the payload codec.
func (cp *ControlPlane) uiOrigins() []string {
	if cp.temporal == nil || cp.temporal.UIURL() == "" {
		return nil
	}
	return []string{cp.temporal.UIURL()}
}
