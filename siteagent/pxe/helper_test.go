package pxe

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/siteagent/boot"
)

// TestMain doubles as our proxy's process in the lab: with BCPX_SERVE set,
// the test binary (run in the server namespace) serves network boot from
// the boot table at BCPX_TABLE until SIGTERM, as bcd site would.
func TestMain(m *testing.M) {
	if os.Getenv("BCPX_SERVE") != "" {
		os.Exit(serveHelper())
	}
	os.Exit(m.Run())
}

func serveHelper() int {
	level := slog.LevelDebug
	if v := os.Getenv("BCPX_LOG"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	table, err := boot.Open(os.Getenv("BCPX_TABLE"), log)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	s, err := Listen(Config{Interface: os.Getenv("BCPX_IFACE"), ServerAddr: os.Getenv("BCPX_ADDR"),
		BIOSFile: os.Getenv("BCPX_BIOS"), EFIFile: os.Getenv("BCPX_EFI")}, log)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	failed := make(chan error, 1)
	s.Serve(table, os.Getenv("BCPX_BOOTURL"), func(err error) { failed <- err })
	fmt.Println("ready", s.Addr())
	code := 0
	select {
	case <-stop:
	case err := <-failed:
		fmt.Println("failed", err)
		code = 1
	}
	s.Close()
	return code
}

var readyRE = regexp.MustCompile(`(?m)^(ready|error) .*$`)

// serveOurs starts our proxy in the server namespace with the boot table
// at tablePath; extraEnv overrides the defaults (BCPX_BIOS=…). It returns
// the process and the line it printed: "ready <ip>" or "error <why>".
func (l *lab) serveOurs(tablePath string, extraEnv ...string) (*proc, string) {
	l.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		l.t.Fatal(err)
	}
	env := append([]string{"BCPX_SERVE=1", "BCPX_TABLE=" + tablePath, "BCPX_IFACE=eth0",
		"BCPX_BOOTURL=http://" + srvIP + ":8080"}, extraEnv...)
	p := l.start("srv", env, exe, "-test.run=^$")
	line, err := p.waitFor(readyRE, 10*time.Second)
	if err != nil {
		l.t.Fatalf("our proxy did not start: %v", err)
	}
	return p, line
}

// packet is one DHCP packet seen on the client's wire.
type packet struct {
	at       time.Time
	src      net.IP
	sport    int
	dport    int
	outgoing bool // sent by the client namespace
	msg      *dhcpv4.DHCPv4
}

// capture records the DHCP packets (UDP to or from 67, 68 and 4011) on the
// client's eth0 with a raw packet socket, beside whatever client runs.
type capture struct {
	fd   int
	mu   sync.Mutex
	pkts []packet
	done chan struct{}
}

func (l *lab) capture(role string) *capture {
	l.t.Helper()
	c := &capture{done: make(chan struct{})}
	err := inNetns(l.ns(role), func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		// ETH_P_ALL: only such a socket also sees what the namespace sends.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		l.t.Fatalf("capture in %s: %v", role, err)
	}
	go c.loop()
	l.t.Cleanup(func() { c.stop() })
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *capture) loop() {
	buf := make([]byte, 65536)
	for {
		select {
		case <-c.done:
			return
		default:
		}
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			continue
		}
		ll, _ := from.(*unix.SockaddrLinklayer)
		if ll == nil || ll.Protocol != htons(unix.ETH_P_IP) {
			continue
		}
		if p, ok := parseUDP(buf[:n]); ok {
			p.at, p.outgoing = time.Now(), ll.Pkttype == unix.PACKET_OUTGOING
			c.mu.Lock()
			c.pkts = append(c.pkts, p)
			c.mu.Unlock()
		}
	}
}

// parseUDP reads an IPv4 UDP datagram carrying DHCP.
func parseUDP(b []byte) (packet, bool) {
	if len(b) < 28 || b[0]>>4 != 4 || b[9] != unix.IPPROTO_UDP {
		return packet{}, false
	}
	ihl := int(b[0]&0x0f) * 4
	if len(b) < ihl+8 {
		return packet{}, false
	}
	u := b[ihl:]
	p := packet{src: net.IP(append([]byte{}, b[12:16]...)),
		sport: int(binary.BigEndian.Uint16(u[0:2])), dport: int(binary.BigEndian.Uint16(u[2:4]))}
	dhcpPort := func(x int) bool { return x == DHCPPort || x == ClientPort || x == ProxyPort }
	if !dhcpPort(p.sport) || !dhcpPort(p.dport) {
		return packet{}, false
	}
	m, err := dhcpv4.FromBytes(u[8:])
	if err != nil {
		return packet{}, false
	}
	p.msg = m
	return p, true
}

// packets returns what was seen so far, filtered by keep.
func (c *capture) packets(keep func(packet) bool) []packet {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []packet
	for _, p := range c.pkts {
		if keep == nil || keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// since keeps the packets seen from t0 on.
func since(t0 time.Time) func(packet) bool {
	return func(p packet) bool { return !p.at.Before(t0) }
}

func (c *capture) stop() {
	select {
	case <-c.done:
	default:
		close(c.done)
		time.Sleep(100 * time.Millisecond) // the loop's read times out
		unix.Close(c.fd)
	}
}

// from keeps the replies that ip sent to the client.
func from(ip string) func(packet) bool {
	return func(p packet) bool { return !p.outgoing && p.src.Equal(net.ParseIP(ip)) }
}
