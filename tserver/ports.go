package tserver

import (
	"net"
	"strconv"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/freeport"
)

// checkPortFree fails with a clear error when host:port cannot be bound. The
// check closes its listener at once, so a race with another process remains
// possible, but the usual case (a second serve, another Temporal) is caught
// before the server or the UI tries to bind and exits.
func checkPortFree(host string, port int, what string) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err,
			"%s address %s is already in use: stop what holds it or choose another port", what, addr)
	}
	return l.Close()
}

// pickPort picks the internal services' ports: freePort, but for a test
// that makes the pick collide.
var pickPort = freePort

// freePort returns a port on host that was free a moment ago, below the
// ephemeral range (freeport), where no outgoing connection takes it before
// the server binds it.
func freePort(host string) (int, error) {
	port, err := freeport.Pick(host)
	if err != nil {
		return 0, errs.Wrap(errs.Unavailable, err, "cannot find a free port on %s", host)
	}
	return port, nil
}

// waitListening polls addr until it accepts a TCP connection or the deadline passes.
func waitListening(addr string, deadline time.Time) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return errs.Wrap(errs.Unavailable, err, "nothing listens on %s yet", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connectHost is the address other processes and the server's own services
// dial: host itself, or loopback when host is a wildcard.
func connectHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() == nil {
			return "::1"
		}
		return "127.0.0.1"
	}
	return host
}
