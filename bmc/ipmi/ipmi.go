// Package ipmi owns the IPMI BMC driver: it implements bmc.Driver over IPMI 2.0
// RMCP+ (lanplus) with github.com/bougou/go-ipmi's client, mapping power actions to
// Chassis Control and confirming each by Get Chassis Status, setting the boot
// flags (device, EFI, once or persistent) and reading what IPMI can tell an
// inspection: FRU 0's manufacturer, model and serial, the system GUID as the
// product UUID, and the BMC's firmware revision. Every operation opens one
// session, with cipher suite 3 unless configured, and closes it. Every failure
// is an errs.Error naming the BMC: UNAUTHENTICATED for a refused login (final,
// so a wrong password is tried once), UNSUPPORTED for what IPMI or the BMC
// cannot do, DRIVER_ERROR for the rest.
package ipmi

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// Defaults of Config.
const (
	DefaultCipherSuite = 3 // RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128: a session in one exchange of each step
	defaultTimeout     = 60 * time.Second
	defaultExchange    = time.Second
	defaultRetries     = 2
	closeTimeout       = 2 * time.Second
)

// Config says how to reach one BMC.
type Config struct {
	Address     bmc.Address     // from bmc.ParseAddress with driver "ipmi"
	Credentials bmc.Credentials // never logged
	// CipherSuite is the RMCP+ cipher suite, DefaultCipherSuite when zero. One
	// suite is asked for, so a session opens without probing the BMC's list.
	CipherSuite int
	// Legacy asks for a legacy BIOS boot in the boot flags; EFI otherwise.
	Legacy bool
	// Timeout bounds each operation but a power action's wait for its new
	// state (Confirm); 60 seconds when zero.
	Timeout time.Duration
	// Exchange is how long one request waits for its answer before it is sent
	// again, Retries times (1 s and 2 when zero): an unreachable BMC fails in
	// Exchange × (Retries+1).
	Exchange time.Duration
	Retries  int
	Confirm  bmc.Confirm
	Logger   *slog.Logger
}

// Driver drives one IPMI BMC. Each operation opens its own session, so a
// Driver is safe for concurrent use.
type Driver struct {
	addr     bmc.Address
	creds    bmc.Credentials
	suite    types.CipherSuiteID
	efi      bool
	timeout  time.Duration
	exchange time.Duration
	retries  int
	confirm  bmc.Confirm
	log      *slog.Logger
}

var _ bmc.Driver = (*Driver)(nil)

// New returns a driver for cfg. It does not contact the BMC.
func New(cfg Config) (*Driver, error) {
	switch {
	case cfg.Address.Driver != bmc.DriverIPMI:
		return nil, errs.Invalid("bmc.driver", "the ipmi driver cannot drive a %q address", cfg.Address.Driver)
	case cfg.Address.Host == "":
		return nil, errs.Invalid("bmc.address", "the BMC address has no host")
	case cfg.Credentials.Username == "" || len(cfg.Credentials.Username) > 16:
		return nil, errs.Invalid("bmc.credentials", "the IPMI driver needs a BMC username of 1 to 16 bytes")
	case len(cfg.Credentials.Password) > 20:
		return nil, errs.Invalid("bmc.credentials", "an IPMI 2.0 password is at most 20 bytes")
	}
	if cfg.CipherSuite == 0 {
		cfg.CipherSuite = DefaultCipherSuite
	}
	if _, _, _, ok := types.GetCipherSuiteAlgorithms(types.CipherSuiteID(cfg.CipherSuite)); !ok {
		return nil, errs.Invalid("bmc.cipherSuite", "cipher suite %d is not one IPMI 2.0 defines (0 to 17; 3 and 17 are the usual ones)", cfg.CipherSuite)
	}
	d := &Driver{addr: cfg.Address, creds: cfg.Credentials, suite: types.CipherSuiteID(cfg.CipherSuite), efi: !cfg.Legacy,
		timeout: cfg.Timeout, exchange: cfg.Exchange, retries: cfg.Retries, confirm: cfg.Confirm}
	if d.timeout <= 0 {
		d.timeout = defaultTimeout
	}
	if d.exchange <= 0 {
		d.exchange = defaultExchange
	}
	if d.retries <= 0 {
		d.retries = defaultRetries
	}
	if d.confirm.Timeout <= 0 {
		d.confirm.Timeout = bmc.DefaultConfirmTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d.log = cfg.Logger.With("bmc", d.host(), "driver", "ipmi")
	return d, nil
}

// Close does nothing: sessions live for one operation. Safe to call twice.
func (d *Driver) Close() error { return nil }

// host is host:port, the name of the BMC in messages.
func (d *Driver) host() string { return d.addr.HostPort() }

// session is one operation's IPMI session.
type session struct {
	c      *client.Client
	conn   *dialer
	cancel context.CancelFunc
}

// open logs in for one operation that may take timeout. The caller closes
// the session with close.
func (d *Driver) open(ctx context.Context, op string, timeout time.Duration) (*session, context.Context, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	port := d.addr.Port
	if port == 0 {
		port = 623
	}
	c, err := client.NewClient(d.addr.Host, port, d.creds.Username, d.creds.Password)
	if err != nil {
		cancel()
		return nil, nil, errs.Wrap(errs.InvalidInput, err, "the IPMI client refused the BMC username").WithOp(op)
	}
	dl := &dialer{addr: net.JoinHostPort(d.addr.Host, strconv.Itoa(port))}
	c.WithInterface(client.InterfaceLanplus).WithCipherSuiteID(d.suite).WithTimeout(d.exchange).WithRetry(d.retries).WithUDPProxy(dl)
	if err := c.Connect(ctx); err != nil {
		dl.close()
		cancel()
		return nil, nil, d.fail(op, err)
	}
	return &session{c: c, conn: dl, cancel: cancel}, ctx, nil
}

// close ends the session at the BMC, whose session table is small, within
// closeTimeout even when the operation's context is done.
func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = s.c.Close(ctx)
	s.conn.close()
	s.cancel()
}

// dialer dials the BMC's UDP port for go-ipmi and keeps the socket, so a
// login that fails does not leak it (go-ipmi closes it only with a session).
// It also brackets IPv6 hosts, which go-ipmi's own dial does not.
type dialer struct {
	addr string
	conn net.Conn
}

func (dl *dialer) Dial(network, _ string) (net.Conn, error) {
	c, err := net.Dial(network, dl.addr)
	if err == nil {
		dl.conn = c
	}
	return c, err
}

func (dl *dialer) close() {
	if dl.conn != nil {
		_ = dl.conn.Close()
	}
}
