package controlplane

import (
	"errors"
	"net"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/tserver"
)

// listeners are the ports serve listens on itself, bound by listen before
// anything starts and handed to what serves them as it starts (take); Stop
// closes those never handed over.
type listeners struct{ api, agents, metrics net.Listener }

// listen binds serve's own ports, the API's (its TLS pair loaded first),
// the agents' (with a CA) and /metrics', and checks the embedded Temporal server's frontend and Web UI
// ports, which the server binds itself as it starts. It runs before
// anything starts: a port in use fails serve at once, naming its flag, with
// nothing to stop (not after PostgreSQL and Temporal came up), and serve's
// own ports cannot be taken between a check and the bind.
func (cp *ControlPlane) listen() error {
	bind := func(ln *net.Listener, addr, what, flag string) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return errs.Wrap(errs.Unavailable, err, "%s cannot listen on %s (pick another with %s)", what, addr, flag)
		}
		*ln = l
		return nil
	}
	if on(cp.cfg.MetricsListen) {
		if err := bind(&cp.ln.metrics, cp.cfg.MetricsListen, "/metrics", "--metrics-listen, or off"); err != nil {
			return err
		}
	}
	if cp.cfg.TemporalAddress == "" {
		host, port, uiPort, err := cp.embeddedPorts()
		if err != nil {
			return err
		}
		if err := tserver.CheckPorts(tserver.Config{Host: host, FrontendPort: port, UIPort: -1}); err != nil {
			return naming(err, "--temporal-listen")
		}
		if err := tserver.CheckPorts(tserver.Config{Host: host, UIPort: uiPort}); err != nil {
			return naming(err, "--ui-listen, or off")
		}
	}
	if cp.cfg.Only == OnlyWorker {
		return nil
	}
	var err error
	if cp.apiCertificate, err = cp.apiCert(); err != nil {
		return err
	}
	if err := bind(&cp.ln.api, cp.cfg.Listen, "the API", "--listen"); err != nil {
		return err
	}
	if cp.ca == nil || !on(cp.cfg.AgentsListen) {
		return nil
	}
	if _, _, err := net.SplitHostPort(cp.cfg.AgentsListen); err != nil {
		return errs.Invalid("agents-listen", "want host:port, got %q", cp.cfg.AgentsListen)
	}
	return bind(&cp.ln.agents, cp.cfg.AgentsListen, "the agents' listener", "--agents-listen")
}

// naming adds the flag that sets the port to err's message.
func naming(err error, flag string) error {
	var e *errs.Error
	if !errors.As(err, &e) {
		return err
	}
	return e.WithMsg(e.Msg + " (with " + flag + ")")
}

// on reports whether a listen flag names an address ("" and "off" do not).
func on(addr string) bool { return addr != "" && addr != "off" }

// take hands *ln over to its server: the caller serves (and closes) it.
func take(ln *net.Listener) net.Listener {
	l := *ln
	*ln = nil
	return l
}

// close closes the listeners never handed over.
func (l *listeners) close() {
	for _, ln := range []*net.Listener{&l.api, &l.agents, &l.metrics} {
		if *ln != nil {
			(*ln).Close()
			*ln = nil
		}
	}
}
