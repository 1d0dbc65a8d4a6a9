package tserver

import (
	"net"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiopts "github.com/temporalio/ui-server/v2/server/server_options"

	"github.com/better-compute/better-compute/errs"
)

// startUI runs the Temporal Web UI on port, pointed at the frontend. The UI
// server's Start blocks and exits the process if it cannot bind, so the port
// was checked in resolvePorts; here we wait until it answers.
func (s *Server) startUI(cfg Config, port int) error {
	ui := uiserver.NewServer(uiopts.WithConfigProvider(&uiconfig.Config{
		Host:                cfg.Host,
		Port:                port,
		TemporalGRPCAddress: s.frontend,
		TLS:                 s.uiTLS(),
		EnableUI:            true,
		Codec:               uiconfig.Codec{Endpoint: cfg.CodecEndpoint},
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
	}))
	s.ui = ui
	go func() {
		if err := ui.Start(); err != nil {
			s.log.Error("temporal web UI stopped", "err", err)
		}
	}()
	addr := net.JoinHostPort(connectHost(cfg.Host), strconv.Itoa(port))
	if err := waitListening(addr, time.Now().Add(startTimeout)); err != nil {
		return errs.Wrap(errs.Unavailable, err, "the Temporal Web UI did not start on %s", addr)
	}
	s.uiURL = "http://" + addr
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
