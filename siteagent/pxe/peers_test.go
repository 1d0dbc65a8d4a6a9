package pxe

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// dnsmasqBase runs dnsmasq in the foreground, DNS off, on eth0 only, with
// no configuration but its flags.
func (l *lab) dnsmasqBase() []string {
	dir := l.t.TempDir()
	return []string{"dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--interface=eth0",
		"--bind-interfaces", "--log-dhcp", "--log-facility=-", "--dhcp-leasefile=" + filepath.Join(dir, "leases"),
		"--pid-file=" + filepath.Join(dir, "pid")}
}

var (
	dnsmasqReady   = regexp.MustCompile(`(?m)DHCP, (IP range|proxy on subnet)`)
	dnsmasqStarted = regexp.MustCompile(`(?m)DHCP, (IP range|proxy on subnet)|TFTP root is`)
)

// startLeaser runs dnsmasq as the network's DHCP server: it leases
// addresses and knows nothing of PXE. --no-ping offers at once.
func (l *lab) startLeaser() *proc {
	l.t.Helper()
	args := append(l.dnsmasqBase(), "--dhcp-range=10.77.0.100,10.77.0.199,255.255.255.0,1h", "--no-ping")
	p := l.start("leaser", nil, args...)
	if _, err := p.waitFor(dnsmasqReady, 10*time.Second); err != nil {
		l.t.Fatalf("the leasing dnsmasq: %v", err)
	}
	return p
}

// startReferenceProxy runs dnsmasq in proxy-DHCP mode on the server's
// address, making the same decisions as our boot table: the known
// ramdisk MACs get iPXE by architecture (the iPXE client its script URL),
// the others nothing.
func (l *lab) startReferenceProxy() *proc {
	l.t.Helper()
	args := append(l.dnsmasqBase(), "--dhcp-range=10.77.0.0,proxy",
		"--dhcp-host="+macBIOS+",set:rd", "--dhcp-host="+macEFI+",set:rd", "--dhcp-host="+macIPXE+",set:rd",
		"--dhcp-ignore=tag:!rd", "--dhcp-userclass=set:ipxe,iPXE",
		`--pxe-service=tag:!ipxe,x86PC,"bc",undionly.kpxe`,
		`--pxe-service=tag:!ipxe,X86-64_EFI,"bc",snponly.efi`,
		`--pxe-service=tag:ipxe,x86PC,"bc",http://`+srvIP+`:8080/ipxe?mac=`+macIPXE,
		`--pxe-service=tag:ipxe,X86-64_EFI,"bc",http://`+srvIP+`:8080/ipxe?mac=`+macIPXE)
	p := l.start("srv", nil, args...)
	if _, err := p.waitFor(dnsmasqReady, 10*time.Second); err != nil {
		l.t.Fatalf("the reference dnsmasq: %v", err)
	}
	return p
}

// clientArgs is the command line of a real DHCP client sending c's PXE
// options: vendor class (60), architecture (93), UUID (97), user class
// (77). Neither configures the interface: their scripts only record.
func (l *lab) clientArgs(client string, c pxeCase) []string {
	l.t.Helper()
	dir := l.t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nenv > \""+dir+"/env.$$\"\n"), 0o755); err != nil {
		l.t.Fatal(err)
	}
	switch client {
	case "udhcpc":
		args := []string{"udhcpc", "-i", "eth0", "-f", "-q", "-n", "-t", "3", "-T", "1", "-s", script,
			"-V", c.vendor(), "-x", fmt.Sprintf("0x5d:%04x", c.arch), "-x", "0x61:00" + c.uuid}
		if c.ipxe {
			args = append(args, "-x", "0x4d:"+hex.EncodeToString([]byte("iPXE")))
		}
		return args
	case "dhclient":
		conf := filepath.Join(dir, "dhclient.conf")
		var b strings.Builder
		b.WriteString("option bc-arch code 93 = unsigned integer 16;\noption bc-uuid code 97 = string;\n")
		fmt.Fprintf(&b, "send vendor-class-identifier %q;\nsend bc-arch %d;\nsend bc-uuid 00:%s;\n", c.vendor(), c.arch, colonHex(c.uuid))
		if c.ipxe {
			b.WriteString("send user-class \"iPXE\";\n")
		}
		b.WriteString("timeout 5;\nretry 1;\ninitial-interval 1;\n")
		if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
			l.t.Fatal(err)
		}
		return []string{"dhclient", "-4", "-d", "-1", "-v", "-cf", conf, "-lf", filepath.Join(dir, "leases"),
			"-pf", filepath.Join(dir, "pid"), "-sf", script, "eth0"}
	}
	l.t.Fatalf("no client %q", client)
	return nil
}

func colonHex(h string) string {
	var parts []string
	for i := 0; i+2 <= len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, ":")
}

// proxyRequest does what PXE firmware does after a proxy offer: a REQUEST
// to the proxy's port 4011 from the client's address, carrying its PXE
// options and, when the offer had a boot menu (dnsmasq's), the first
// item as option 43's boot item (71).
func (l *lab) proxyRequest(c pxeCase, offer *dhcpv4.DHCPv4, server string) (*dhcpv4.DHCPv4, error) {
	mac, _ := net.ParseMAC(c.mac)
	uuid, _ := hex.DecodeString("00" + c.uuid)
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithHwAddr(mac),
		dhcpv4.WithClientIP(net.ParseIP(clientIP)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(c.vendor())),
		dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{byte(c.arch >> 8), byte(c.arch)}),
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, uuid),
	}
	if c.ipxe {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))
	}
	if item := firstMenuItem(offer.GetOneOption(dhcpv4.OptionVendorSpecificInformation)); item != nil {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionVendorSpecificInformation, append([]byte{71, 4}, append(item, 0, 0, 255)...)))
	}
	req, err := dhcpv4.New(mods...)
	if err != nil {
		return nil, err
	}
	var ack *dhcpv4.DHCPv4
	err = inNetns(l.ns("client"), func() error {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(clientIP), Port: ClientPort})
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.WriteToUDP(req.ToBytes(), &net.UDPAddr{IP: net.ParseIP(server), Port: ProxyPort}); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUDP(buf)
			if err != nil {
				return fmt.Errorf("no ACK from %s:%d: %w", server, ProxyPort, err)
			}
			m, err := dhcpv4.FromBytes(buf[:n])
			if err == nil && m.TransactionID == req.TransactionID && m.MessageType() == dhcpv4.MessageTypeAck {
				ack = m
				return nil
			}
		}
	})
	return ack, err
}

// firstMenuItem reads the first boot item type from a PXE boot menu
// (option 43, sub-option 9: type(2) len(1) text), nil without one.
func firstMenuItem(opt43 []byte) []byte {
	for i := 0; i+1 < len(opt43); {
		code, n := opt43[i], int(opt43[i+1])
		if code == 255 || i+2+n > len(opt43) {
			return nil
		}
		if code == 9 && n >= 2 {
			return append([]byte{}, opt43[i+2:i+4]...)
		}
		i += 2 + n
	}
	return nil
}
