//go:build !linux

package pxe

import (
	"net"

	"github.com/better-compute/better-compute/errs"
)

// listenUDP needs SO_BINDTODEVICE, which only Linux has.
func listenUDP(iface string, _ net.IP, _ int) (*net.UDPConn, error) {
	return nil, errs.New(errs.Unsupported, "network boot on %s needs Linux (proxy DHCP binds to the interface)", iface)
}
