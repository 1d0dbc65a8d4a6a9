// Package pxe owns the site agent's network boot below HTTP: proxy DHCP on
// the provisioning interface (ports 67 and 4011, beside the DHCP server
// that leases addresses; it never leases one) and a read-only TFTP server
// for the iPXE binaries. Firmware gets iPXE for its architecture, iPXE gets
// the URL of its per-MAC script on the boot listener (siteagent/boot), and
// every answer is decided by the machine's boot entry: a MAC without one
// gets nothing and is recorded as a PXE discovery.
package pxe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/pin/tftp/v3"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/siteagent/boot"
)

// Debian's ipxe package installs its builds here.
const (
	DefaultBIOSFile = "/usr/lib/ipxe/undionly.kpxe" // legacy BIOS: iPXE over the NIC's UNDI driver
	DefaultEFIFile  = "/usr/lib/ipxe/snponly.efi"   // x86-64 UEFI: iPXE over the firmware's network driver
)

// TFTPPort is where the iPXE binaries are served.
const TFTPPort = 69

// Config is the site's network-boot configuration.
type Config struct {
	// Interface is the provisioning network's interface; "" turns proxy
	// DHCP and TFTP off (the emulated rack boots over HTTP alone).
	Interface string
	// ServerAddr is this agent's IPv4 address on Interface, given to
	// machines as their next server; by default the interface's first.
	ServerAddr string
	BIOSFile   string // iPXE for legacy BIOS; DefaultBIOSFile when ""
	EFIFile    string // iPXE for x86-64 UEFI; DefaultEFIFile when ""
	// Count hears each DHCP request's outcome: "answered" (an answer was
	// decided; a send that fails is logged), "ignored" or "discovered" (an
	// unknown MAC PXE-booting). Nil counts nothing.
	Count func(outcome string)
}

// Enabled reports whether network boot is configured.
func (c Config) Enabled() bool { return c.Interface != "" }

// Table is the boot table as proxy DHCP uses it.
type Table interface {
	Lookup(mac string) (kinds.BootEntry, bool)
	Discovered(d boot.Discovery) error
	// MarkMAC records that the boot of the node whose entry serves mac
	// reached milestone name (boot.MilestoneDHCP).
	MarkMAC(mac, name, detail string)
}

// Server is proxy DHCP and TFTP with their sockets bound, from Listen;
// Serve starts answering.
type Server struct {
	cfg   Config
	log   *slog.Logger
	ip    net.IP
	files map[string][]byte // TFTP name → content

	dhcp, proxy, tftpConn *net.UDPConn
	tftp                  *tftp.Server

	discoveries chan boot.Discovery
	mu          sync.Mutex // orders Serve and Close
	wg          sync.WaitGroup
	closeOnce   sync.Once
	closed      chan struct{}
}

// Listen checks cfg (the interface, its address, the iPXE files) and binds
// the ports, so that a mistake stops the agent at start with what to fix.
func Listen(cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.BIOSFile == "" {
		cfg.BIOSFile = DefaultBIOSFile
	}
	if cfg.EFIFile == "" {
		cfg.EFIFile = DefaultEFIFile
	}
	s := &Server{cfg: cfg, log: log.With("component", "pxe"), discoveries: make(chan boot.Discovery, 64), closed: make(chan struct{})}
	var err error
	if s.files, err = loadFiles(cfg); err != nil {
		return nil, err
	}
	if s.ip, err = serverIP(cfg); err != nil {
		return nil, err
	}
	if err := s.bind(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// loadFiles reads the iPXE builds once: what is served is what was checked.
func loadFiles(cfg Config) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, f := range []struct{ flag, path, what string }{
		{"ipxe-bios", cfg.BIOSFile, "iPXE for legacy BIOS (undionly.kpxe)"},
		{"ipxe-efi", cfg.EFIFile, "iPXE for x86-64 UEFI (snponly.efi or ipxe.efi)"},
	} {
		b, err := os.ReadFile(f.path)
		if err == nil && len(b) == 0 {
			err = errors.New("the file is empty")
		}
		if err != nil {
			return nil, errs.Invalid(f.flag, "%s at %s: %v; install Debian's ipxe package (apt-get install ipxe) or give --%s the path of a build",
				f.what, f.path, err, f.flag)
		}
		name := filepath.Base(f.path)
		if _, dup := files[name]; dup {
			return nil, errs.Invalid(f.flag, "--ipxe-bios and --ipxe-efi are both named %s; TFTP serves them by name, so give files of different names", name)
		}
		files[name] = b
	}
	return files, nil
}

// serverIP is the address machines reach this agent at on the interface.
func serverIP(cfg Config) (net.IP, error) {
	ifc, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, errs.Invalid("pxe-interface", "the proxy-DHCP interface %q does not exist (`ip -br link` lists them); give --pxe-interface the provisioning network's interface",
			cfg.Interface)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read the addresses of %s", cfg.Interface)
	}
	var want net.IP
	if cfg.ServerAddr != "" {
		if want = net.ParseIP(cfg.ServerAddr).To4(); want == nil {
			return nil, errs.Invalid("pxe-server-addr", "--pxe-server-addr %q is not an IPv4 address", cfg.ServerAddr)
		}
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.To4() == nil || n.IP.IsLinkLocalUnicast() {
			continue
		}
		if want == nil || want.Equal(n.IP) {
			return n.IP.To4(), nil
		}
	}
	if want != nil {
		return nil, errs.Invalid("pxe-server-addr", "%s is not an address of %s; give --pxe-server-addr one of its addresses (`ip -br addr show %s`)",
			want, cfg.Interface, cfg.Interface)
	}
	return nil, errs.Invalid("pxe-interface", "%s has no IPv4 address; give it the provisioning network's address (ip addr add … dev %s)",
		cfg.Interface, cfg.Interface)
}

// bind opens 67 and 4011 on any address (PXE clients broadcast) and TFTP
// on the server address, all on the interface only.
func (s *Server) bind() error {
	var err error
	if s.dhcp, err = listenUDP(s.cfg.Interface, net.IPv4zero, DHCPPort); err != nil {
		return err
	}
	if s.proxy, err = listenUDP(s.cfg.Interface, net.IPv4zero, ProxyPort); err != nil {
		return err
	}
	s.tftpConn, err = listenUDP(s.cfg.Interface, s.ip, TFTPPort)
	return err
}

// Addr is the server's address on the provisioning interface.
func (s *Server) Addr() net.IP { return s.ip }

// Serve answers on the bound ports until Close: proxy DHCP decided by
// table, iPXE sent to bootURL (http://host:port of the boot listener).
// fail hears of a socket that stopped for another reason than Close.
func (s *Server) Serve(table Table, bootURL string, fail func(error)) {
	set := settings{ServerIP: s.ip, BootURL: bootURL,
		BIOSFile: filepath.Base(s.cfg.BIOSFile), EFIFile: filepath.Base(s.cfg.EFIFile)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() {
		return
	}
	s.tftp = s.newTFTP()
	s.wg.Add(4)
	go s.answer(s.dhcp, DHCPPort, table, set, fail)
	go s.answer(s.proxy, ProxyPort, table, set, fail)
	go s.record(table)
	go s.serveTFTP(s.tftp, fail)
	s.log.Info("network boot started", "interface", s.cfg.Interface, "server", s.ip.String(),
		"bios", s.cfg.BIOSFile, "efi", s.cfg.EFIFile, "script", bootURL+"/ipxe")
}

// answer reads requests on conn and sends what decide says.
func (s *Server) answer(conn *net.UDPConn, port int, table Table, set settings, fail func(error)) {
	defer s.wg.Done()
	buf := make([]byte, 4096)
	for {
		n, peer, err := conn.ReadFromUDP(buf)
		if err != nil {
			if !s.isClosed() {
				fail(errs.Wrap(errs.Unavailable, err, "proxy DHCP stopped reading port %d on %s", port, s.cfg.Interface))
			}
			return
		}
		req, err := dhcpv4.FromBytes(buf[:n])
		if err != nil {
			s.log.Debug("not a DHCP packet", "port", port, "from", peer.String(), "err", err)
			continue
		}
		s.handle(conn, req, peer, port, table, set)
	}
}

func (s *Server) handle(conn *net.UDPConn, req *dhcpv4.DHCPv4, peer *net.UDPAddr, port int, table Table, set settings) {
	d := decide(req, port, table.Lookup, set)
	if s.cfg.Count != nil {
		s.cfg.Count(d.outcome())
	}
	// The attributes are built only for a line that is logged: a busy
	// network is mostly requests this proxy ignores.
	attrs := func(kv ...any) []any {
		return append([]any{"mac", req.ClientHWAddr.String(), "type", req.MessageType().String(), "port", port}, kv...)
	}
	if d.discovered != nil {
		select {
		case s.discoveries <- *d.discovered:
		default: // a flood of unknown MACs: drop rather than delay the answers
		}
	}
	if d.reply == nil {
		if d.discovered != nil {
			s.log.Info("unknown MAC PXE-booting; no offer", attrs("uuid", d.discovered.ClientUUID, "arch", d.discovered.Arch)...)
		} else if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("no answer", attrs("why", d.why)...)
		}
		return
	}
	dst := destination(req, peer)
	if _, err := conn.WriteToUDP(d.reply.ToBytes(), dst); err != nil {
		s.log.Warn("cannot send the proxy-DHCP answer", attrs("to", dst.String(), "err", err)...)
		return
	}
	if s.log.Enabled(context.Background(), slog.LevelInfo) {
		s.log.Info("proxy-DHCP answer sent", attrs("reply", d.reply.MessageType().String(), "file", d.file, "to", dst.String())...)
	}
	table.MarkMAC(req.ClientHWAddr.String(), boot.MilestoneDHCP, fmt.Sprintf("%s on port %d: %s", d.reply.MessageType(), port, d.file))
}

// record writes discoveries to the table off the answering path: the
// table syncs a file per write.
func (s *Server) record(table Table) {
	defer s.wg.Done()
	for {
		select {
		case d := <-s.discoveries:
			if err := table.Discovered(d); err != nil {
				s.log.Error("cannot record a PXE discovery", "mac", d.MAC, "err", err)
			}
		case <-s.closed:
			return
		}
	}
}

func (s *Server) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Close stops answering and releases the ports. Safe to call twice and on
// a nil Server.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.closed)
		s.mu.Unlock()
		if s.tftp != nil {
			s.tftp.Shutdown() // in single-port mode it waits for nothing; closing the socket ends its loop
		}
		for _, c := range []*net.UDPConn{s.dhcp, s.proxy, s.tftpConn} {
			if c != nil {
				c.Close()
			}
		}
		s.wg.Wait()
	})
}
