package pxe

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
)

// listenUDP binds ip:port on iface only (SO_BINDTODEVICE), allowed to
// broadcast. It sets no SO_REUSEADDR or SO_REUSEPORT, on purpose: a DHCP
// server already on the port makes the bind fail, instead of the two
// silently sharing (or splitting) the clients' packets.
func listenUDP(iface string, ip net.IP, port int) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, iface)
			if serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return nil, bindError(iface, port, err)
	}
	return pc.(*net.UDPConn), nil
}

// bindError says what keeps the port and what to do about it.
func bindError(iface string, port int, err error) error {
	p := strconv.Itoa(port) + "/udp"
	switch {
	case errors.Is(err, unix.EADDRINUSE):
		return errs.Wrap(errs.Unavailable, err, "port %s on %s is taken by another program (a DHCP or TFTP server: dnsmasq, isc-dhcp-server, kea, tftpd-hpa?); "+
			"`ss -ulpn 'sport = :%d'` names it; stop it on this interface or run bcd site's network boot on a host without one", p, iface, port)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return errs.Wrap(errs.Unavailable, err, "binding port %s on %s needs root or CAP_NET_BIND_SERVICE (and CAP_NET_RAW before Linux 5.7, for SO_BINDTODEVICE); "+
			"run bcd site as root or grant it (the Debian package's bcd-site.service does)", p, iface)
	case errors.Is(err, unix.ENODEV):
		return errs.Wrap(errs.InvalidInput, err, "the proxy-DHCP interface %q does not exist (`ip -br link` lists them)", iface)
	}
	return errs.Wrap(errs.Unavailable, err, "cannot bind port %s on %s", p, iface)
}
