package tserver

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	uiconfig "github.com/temporalio/ui-server/v2/server/config"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/bodytimeout"
	"github.com/better-compute/better-compute/webui"
)

// startUI serves the Temporal Web UI on port, pointed at the frontend,
// behind cfg.UIGate (Start refuses a UI without one: it shows every tenant's
// workflows). The UI server's handler is served by our own listener (its
// Start binds by itself and exits the process when it cannot).
func (s *Server) startUI(cfg Config, port int) error {
	ui, err := webui.UIHandler(&uiconfig.Config{
		TemporalGRPCAddress: s.frontend,
		TLS:                 s.uiTLS(),
		EnableUI:            true,
		Codec:               uiconfig.Codec{Endpoint: cfg.CodecEndpoint},
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
		// The UI hides its write actions; the gate refuses them anyway.
		DisableWriteActions: !cfg.UIWriteActions,
	})
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "the Temporal Web UI cannot listen on %s", addr)
	}
	s.ui = &http.Server{Handler: bodytimeout.Handler(cfg.UIGate(ui), bodytimeout.Default),
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := s.ui.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("temporal web UI stopped", "err", err)
		}
	}()
	s.uiURL = "http://" + net.JoinHostPort(connectHost(cfg.Host), strconv.Itoa(port))
	return nil
}

// uiTLS is how the UI dials the frontend: with the frontend's control-plane
// certificate and key, verifying the frontend against the CA. The UI server
// reads files (and re-reads the pair when it changes).
func (s *Server) uiTLS() uiconfig.TLS {
	if s.tls == nil {
		return uiconfig.TLS{}
	}
	f := s.tls.files
	return uiconfig.TLS{CaFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile,
		EnableHostVerification: true, ServerName: s.tls.serverName}
}
