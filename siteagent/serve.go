package siteagent

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/better-compute/better-compute/activities/site"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/bodytimeout"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/siteagent/artifacts"
	"github.com/better-compute/better-compute/siteagent/boot"
	"github.com/better-compute/better-compute/siteagent/cache"
	"github.com/better-compute/better-compute/siteagent/relay"
	"github.com/better-compute/better-compute/steps"
	bcworker "github.com/better-compute/better-compute/worker"
)

// serve starts the boot listener (plain HTTP) and the relay (TLS presenting
// [serving leaf, CA], client certificates verified when given).
func (a *Agent) serve(bootLn, relayLn net.Listener) error {
	relayTLS := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: a.id.certs.servingCert, // the current one: a renewal replaces it
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      a.id.caPool,
		// Ramdisks join without a certificate, then present a ramdisk's;
		// installed machines renew with a node's (handlers check the role).
		VerifyConnection: pki.VerifyPeer(a.id.trustDomain, pki.Want{Roles: []pki.Role{pki.RoleRamdisk, pki.RoleNode}, Optional: true}),
	}
	params := boot.Params{BootURL: a.bootURL, RelayURL: a.relayURL, CAFingerprint: a.id.caFingerprint}
	bootMux := http.NewServeMux()
	bh := a.boot.Handler(params, a.cfg.RamdiskDir)
	bootMux.Handle("GET /ipxe", bh)
	bootMux.Handle("GET /ramdisk/", bh)
	bootMux.Handle("GET "+cache.PathPrefix, a.cache.Handler())
	arts, err := a.artifactsHandler()
	if err != nil {
		return err
	}
	bootMux.Handle("GET "+artifacts.PathPrefix, arts)

	base, cancel := context.WithCancel(context.Background())
	a.cancelServe = cancel
	go a.keepArtifactsBase(base)
	mk := func(h http.Handler) *http.Server {
		return &http.Server{Handler: bodytimeout.Handler(h, bodytimeout.Default), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, BaseContext: func(net.Listener) context.Context { return base }}
	}
	bootSrv, relaySrv := mk(bootMux), mk(a.relay.Handler())
	relaySrv.TLSConfig = relayTLS
	a.servers = []*http.Server{bootSrv, relaySrv}
	go func() {
		if err := bootSrv.Serve(bootLn); serveErr(err) {
			a.fail(errs.Wrap(errs.Unavailable, err, "the boot listener stopped"))
		}
	}()
	go func() {
		if err := relaySrv.ServeTLS(relayLn, "", ""); serveErr(err) {
			a.fail(errs.Wrap(errs.Unavailable, err, "the relay listener stopped"))
		}
	}()
	if a.pxe != nil {
		a.pxe.Serve(a.boot, a.bootURL, a.fail)
	}
	return nil
}

func (a *Agent) fail(err error) {
	a.log.Error("site agent failed", "err", err)
	select {
	case a.errc <- err:
	default:
	}
}

// joinProxy forwards ramdisk joins to the control plane's JoinService over
// the agent's mTLS client.
func joinProxy(hc *http.Client, baseURL string) relay.JoinFunc {
	jc := bettercomputev1connect.NewJoinServiceClient(hc, baseURL)
	return func(ctx context.Context, req *v1.JoinRequest) (*v1.JoinResponse, error) {
		resp, err := jc.Join(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, site.FromConnect("ramdisk.join", err)
		}
		return resp.Msg, nil
	}
}

// startWorker dials Temporal and serves the site's activities on its task
// queue. Several agents of one site may serve the same queue.
func (a *Agent) startWorker() error {
	keys := &siteKeys{a: a}
	ring, err := codec.NewKeyring(keys, keys.keys()...)
	if err != nil {
		return err
	}
	dc := ring.DataConverter(a.id.TenantID)
	fronts, addrs := a.temporalFrontends()
	opts := client.Options{
		HostPort:         fronts.Target(),
		Namespace:        a.id.TemporalNamespace,
		DataConverter:    dc,
		FailureConverter: codec.NewFailureConverter(dc),
		Logger:           tlog.NewStructuredLogger(a.log.With("component", "temporal")),
		Identity:         workerIdentity(a.id),
		MetricsHandler:   a.metrics.Temporal(),
	}
	tc, err := a.temporalTLS()
	if err != nil {
		return err
	}
	opts.ConnectionOptions.TLS, opts.ConnectionOptions.DialOptions = tc, fronts.DialOptions()
	opts.ConnectionOptions.GrpcCompression = codec.Compression()
	// The worker takes the client's interceptors: each activity's span is a
	// child of the workflow's, carried in the task's header.
	if opts.Interceptors, err = tracing.Temporal(a.cfg.Tracer); err != nil {
		return err
	}
	c, err := client.Dial(opts)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot reach Temporal at %s", strings.Join(addrs, ","))
	}
	a.tc = c
	queue := kinds.SiteTaskQueue(a.id.SiteID)
	if a.id.TaskQueue != "" && a.id.TaskQueue != queue {
		a.log.Warn("the control plane named another task queue; serving the site's", "given", a.id.TaskQueue, "serving", queue)
	}
	reg, err := steps.Registry(a.cfg.Plugins...)
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "the site agent's plugins")
	}
	a.w, err = bcworker.Site(c, a.id.SiteID, a.acts, bcworker.SiteOptions{Attempts: a.attempts, Logger: a.log, Steps: reg,
		OnFatalError: func(err error) { a.fail(errs.Wrap(errs.Unavailable, err, "the Temporal worker stopped")) }})
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "the site agent's steps")
	}
	if err := a.w.Start(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot start the worker on %s", queue)
	}
	return nil
}

// temporalTLS is how the worker dials Temporal: mutual TLS with the
// agent's certificate when the join said so (or Config.TemporalTLS forces
// it), else nil for plain. New connections present the current
// certificate, so a renewal needs no restart.
func (a *Agent) temporalTLS() (*tls.Config, error) {
	if !a.id.TemporalTLS && !a.cfg.TemporalTLS {
		return nil, nil
	}
	name := a.id.TemporalServerName
	if name == "" {
		host, _, err := net.SplitHostPort(a.id.TemporalAddress)
		if err != nil {
			return nil, errs.Invalid("temporalAddress", "Temporal address %q is not host:port", a.id.TemporalAddress)
		}
		name = host
	}
	return a.id.certs.clientTLS(a.id.caPool, name, a.id.trustDomain)
}

func workerIdentity(id *identity) string {
	h, _ := os.Hostname()
	return "bcd-site/" + id.Identity + "@" + h
}
