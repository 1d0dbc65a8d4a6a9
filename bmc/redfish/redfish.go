// Package redfish owns the Redfish BMC driver: it implements bmc.Driver on top of
// github.com/stmcginnis/gofish, finding the machine's ComputerSystem, mapping power
// actions to ComputerSystem.Reset types the BMC allows, setting the boot override,
// reading inventory (with NIC MACs from EthernetInterfaces), and mounting an ISO
// on the CD/DVD virtual media (media.go). It logs in with a Redfish session,
// kept for the BMC's next operation a short while (KeepSession), falling back
// to basic authentication (session.go), and checks the
// BMC's certificate as bmc.TLS says. Every failure is
// an errs.Error: DRIVER_ERROR naming the BMC and the HTTP status, UNSUPPORTED for
// what the BMC does not allow, INVALID_INPUT for an address that names no system.
package redfish

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
)

// Config says how to reach one BMC.
type Config struct {
	Address     bmc.Address     // from bmc.ParseAddress with driver "redfish"
	Credentials bmc.Credentials // never logged; its TLS says how the BMC's certificate is checked
	// BasicAuth sends the credentials with every request. Otherwise an
	// operation uses the session its BMC's last one kept, or logs in through
	// the SessionService; the session is logged out after KeepSession unused.
	// A service without sessions gets basic authentication.
	BasicAuth bool
	// Timeout bounds each operation; 60 seconds when zero.
	Timeout time.Duration
	// Confirm bounds how long a power action waits for the BMC to report
	// its new state (bmc.DefaultConfirmTimeout when zero), on top of Timeout.
	Confirm bmc.Confirm
	Logger  *slog.Logger
}

// Driver drives one Redfish BMC. Each operation opens its own gofish client
// bound to the operation's context, so a Driver is safe for concurrent use.
type Driver struct {
	addr    bmc.Address
	creds   bmc.Credentials
	basic   bool
	timeout time.Duration
	confirm bmc.Confirm
	tls     bmc.TLS
	key     sessionKey // the sessions this driver may use (session.go)
	http    *http.Client
	log     *slog.Logger
}

var _ bmc.Driver = (*Driver)(nil)

// New returns a driver for cfg. It does not contact the BMC.
func New(cfg Config) (*Driver, error) {
	if cfg.Address.Driver != bmc.DriverRedfish {
		return nil, errs.Invalid("bmc.driver", "the redfish driver cannot drive a %q address", cfg.Address.Driver)
	}
	if cfg.Address.Host == "" {
		return nil, errs.Invalid("bmc.address", "the BMC address has no host")
	}
	if cfg.Credentials.Username == "" {
		return nil, errs.Invalid("bmc.credentials", "the Redfish driver needs a BMC username")
	}
	if err := cfg.Credentials.TLS.Check("bmc.tls", cfg.Address); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Confirm.Timeout <= 0 {
		cfg.Confirm.Timeout = bmc.DefaultConfirmTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr, err := transportFor(cfg.Credentials.TLS)
	if err != nil {
		return nil, err
	}
	return &Driver{
		addr: cfg.Address, creds: cfg.Credentials, basic: cfg.BasicAuth, tls: cfg.Credentials.TLS, timeout: cfg.Timeout, confirm: cfg.Confirm,
		http: &http.Client{Transport: keepAlive{tr}}, log: cfg.Logger.With("bmc", cfg.Address.HostPort(), "driver", "redfish"),
		key: sessionKeyOf(cfg.Address, cfg.Credentials),
	}, nil
}

// Close releases the driver. Its connections stay with the transport its
// TLS policy shares (transportFor), idle ones closing on their own. Safe
// to call twice.
func (d *Driver) Close() error { return nil }

// transports holds one transport per TLS policy (bmc.TLS, compared by
// value), shared by every driver with that policy: a site agent makes a
// Driver per BMC call, and a transport of its own each time cost every call
// a TCP connection and a TLS handshake on both ends (a Redfish operation is
// a login, a few GETs, its action and a logout). A connection is checked
// against the policy once, when it is made, and requests carry their own
// credentials, so connections of one policy are interchangeable; a BMC's
// idle connection closes after idleBMCConn. The transport answers the
// service root from memory (rootCache).
var transports sync.Map // bmc.TLS → *rootCache

// idleBMCConn is how long a BMC connection is kept open unused: long
// enough for the next command of a workflow, short enough not to hold one
// of the few connection slots a BMC has for long.
const idleBMCConn = 30 * time.Second

// keepAlive sends requests without "Connection: close": gofish asks for it
// on every request unless it made the HTTP client itself.
type keepAlive struct{ rt http.RoundTripper }

func (k keepAlive) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Close {
		r := *req // RoundTrip must not change the caller's request
		r.Close = false
		req = &r
	}
	return k.rt.RoundTrip(req)
}

func transportFor(policy bmc.TLS) (http.RoundTripper, error) {
	if rt, ok := transports.Load(policy); ok {
		return rt.(*rootCache), nil
	}
	tc, err := policy.ClientConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.MaxIdleConns = 0 // no bound across BMCs; one host keeps at most MaxIdleConnsPerHost
	tr.MaxIdleConnsPerHost = 2
	tr.IdleConnTimeout = idleBMCConn
	got, _ := transports.LoadOrStore(policy, newRootCache(tr))
	return got.(*rootCache), nil
}

// conn is one operation's connection to the BMC.
type conn struct {
	c      *gofish.APIClient
	cancel context.CancelFunc
	done   func()   // keeps the operation's session for the next; nil with basic auth
	s      *session // the operation's session; nil with basic auth
	reused bool     // the session was kept from an earlier operation
}

func (cn *conn) close() {
	if cn.done != nil {
		cn.done()
	}
	cn.cancel()
}

// forget closes cn without keeping its session, which the BMC refused.
func (cn *conn) forget() {
	cn.done = nil
	cn.close()
}

// connect opens a gofish client bound to ctx, for at most timeout, with the
// session kept from the BMC's last operation when reuse allows and there is
// one, else a session of its own (see session.go), else basic
// authentication.
func (d *Driver) connect(ctx context.Context, op string, timeout time.Duration, reuse bool) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	cfg := gofish.ClientConfig{Endpoint: d.addr.Endpoint(), HTTPClient: d.http}
	cn := &conn{cancel: cancel}
	if !d.basic {
		var s *session
		if reuse {
			s = takeSession(d.key)
		}
		cn.reused = s != nil
		if s == nil {
			var err error
			if s, err = d.login(ctx); err != nil {
				cancel()
				return nil, d.fail(op, err)
			}
		}
		if s != nil {
			cfg.Session, cn.s, cn.done = &gofish.Session{ID: s.path, Token: s.token}, s, func() { d.keepSession(ctx, s) }
		}
	}
	if cfg.Session == nil {
		cfg.Username, cfg.Password, cfg.BasicAuth = d.creds.Username, d.creds.Password, true
	}
	c, err := gofish.ConnectContext(ctx, cfg)
	if err != nil {
		cn.close()
		return nil, d.fail(op, err)
	}
	cn.c = c
	return cn, nil
}

// connectSystem connects for one operation (the driver's timeout) and finds
// the machine's ComputerSystem; the caller closes the connection.
func (d *Driver) connectSystem(ctx context.Context, op string) (*conn, *redfish.ComputerSystem, error) {
	return d.connectSystemFor(ctx, op, d.timeout)
}

// connectSystemFor is connectSystem for an operation that may take timeout.
// The system's read is the operation's first authenticated request: a 401
// to a kept session means the BMC dropped it (it restarted, or timed it
// out early), and the operation logs in afresh, once.
func (d *Driver) connectSystemFor(ctx context.Context, op string, timeout time.Duration) (*conn, *redfish.ComputerSystem, error) {
	cn, err := d.connect(ctx, op, timeout, true)
	if err != nil {
		return nil, nil, err
	}
	sys, err := d.system(cn, op)
	if cn.reused && statusOf(err) == http.StatusUnauthorized {
		d.log.Info("the BMC refused the session kept from its last operation; logging in again")
		cn.forget()
		if cn, err = d.connect(ctx, op, timeout, false); err != nil {
			return nil, nil, err
		}
		sys, err = d.system(cn, op)
	}
	if err != nil {
		cn.close()
		return nil, nil, d.fail(op, err)
	}
	return cn, sys, nil
}

// system finds the machine's ComputerSystem: the one the address names, else
// the one found with the session, else the only one. Errors from the BMC
// come back as gofish gave them.
func (d *Driver) system(cn *conn, op string) (*redfish.ComputerSystem, error) {
	if p := d.addr.SystemPath(); p != "" {
		sys, err := redfish.GetComputerSystem(cn.c, p)
		if statusOf(err) == http.StatusNotFound {
			return nil, errs.Invalid("bmc.address", "BMC %s has no system at %s: check the system id in the BMC address", d.addr.HostPort(), p).WithOp(op)
		}
		return sys, err
	}
	if cn.s != nil && cn.s.system != "" {
		sys, err := redfish.GetComputerSystem(cn.c, cn.s.system)
		if statusOf(err) != http.StatusNotFound {
			return sys, err
		}
		cn.s.system = "" // gone: list the systems again
	}
	systems, err := cn.c.Service.Systems()
	if err != nil {
		return nil, err
	}
	if len(systems) != 1 {
		ids := make([]string, len(systems))
		for i, s := range systems {
			ids[i] = s.ID
		}
		return nil, errs.Invalid("bmc.address", "BMC %s has %d systems %v: name one in the address, e.g. %s/redfish/v1/Systems/<id>",
			d.addr.HostPort(), len(systems), ids, d.addr.Endpoint()).WithOp(op)
	}
	if cn.s != nil {
		cn.s.system = systems[0].ODataID
	}
	return systems[0], nil
}
