// Package freeport picks TCP ports for listeners that bind them a moment
// later, or again after a restart, outside the kernel's ephemeral range.
//
// A port the kernel hands out for port 0 is an ephemeral one, which it also
// gives any outgoing connection as its local port. Picked, closed and bound
// again a moment later (the embedded Temporal server's services bind their
// own), or kept across a restart (a test's serve killed and started again
// on the same ports), such a port can be taken in between by a connection
// of any process, even by a client reconnecting to it, whose socket can
// connect to itself when nothing listens: CI saw the Temporal server's
// worker port taken that way. A port below the ephemeral range is never a
// connection's local port, so only another listener can take it.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Listen binds a TCP listener on host at a port below the ephemeral range,
// tried at random, else (none free in tries) at one the kernel picks.
func Listen(host string) (net.Listener, error) {
	lo, hi := Range()
	for range tries {
		port := lo + rand.IntN(hi-lo)
		if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			return l, nil
		}
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}

// Pick returns a port of Listen, closed again: free a moment ago.
func Pick(host string) (int, error) {
	l, err := Listen(host)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tries bounds Listen's random picks.
const tries = 64

// Range is where Listen picks: [lo, hi), the half below the ephemeral
// range's start (Linux's ip_local_port_range, 32768 when it cannot be
// read), and above the well-known ports.
func Range() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				hi = n
			}
		}
	}
	return max(hi/2, 1024), hi
}
