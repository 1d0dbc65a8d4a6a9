package pxe

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/siteagent/boot"
)

// The ports proxy DHCP answers on.
const (
	// DHCPPort receives the DISCOVERs every client broadcasts; a PXE client
	// among them gets an OFFER that carries no address.
	DHCPPort = 67
	// ProxyPort receives the REQUEST a PXE client sends the proxy after its
	// offer (UEFI firmware and iPXE do); it gets an ACK with the same answer.
	ProxyPort = 4011
	// ClientPort is where broadcast answers go.
	ClientPort = 68
)

// settings are what every answer carries.
type settings struct {
	ServerIP net.IP // siaddr and option 54: the TFTP server, this agent
	BootURL  string // http://host:port of the agent's boot listener
	BIOSFile string // TFTP name of iPXE for legacy BIOS
	EFIFile  string // TFTP name of iPXE for x86-64 UEFI
}

// decision is what to do with one request: send reply, or nothing. An
// unknown MAC asking to boot is a discovery to record, and gets nothing.
type decision struct {
	reply      *dhcpv4.DHCPv4
	file       string          // the boot file or URL in reply
	discovered *boot.Discovery // an unknown PXE client, to record
	why        string          // why nothing is sent, for the log
}

// outcome names the decision for the metrics: a bounded set.
func (d decision) outcome() string {
	switch {
	case d.discovered != nil:
		return "discovered"
	case d.reply == nil:
		return "ignored"
	}
	return "answered"
}

// client is what a PXE request tells about the machine.
type client struct {
	mac  string
	arch iana.Arch
	// hasArch: option 93 was there (arch 0 is legacy BIOS, not "none").
	hasArch bool
	uuid    []byte // option 97 as sent, when well formed (type 0, 16 bytes)
	ipxe    bool   // user class "iPXE": iPXE itself is asking
}

// decide answers one request received on port (DHCPPort or ProxyPort),
// given the boot table's lookup. It only reads; the caller sends the reply
// and records the discovery. A machine is answered only when its entry
// boots the ramdisk: an unknown MAC is recorded and a machine that boots
// from its disk is left alone, so neither waits for iPXE to tell it so.
func decide(req *dhcpv4.DHCPv4, port int, lookup func(mac string) (kinds.BootEntry, bool), s settings) decision {
	c, why := pxeClient(req, port)
	if c == nil {
		return decision{why: why}
	}
	e, ok := lookup(c.mac)
	switch {
	case !ok && port == DHCPPort:
		return decision{why: "no boot entry for this MAC; recorded as a PXE discovery",
			discovered: &boot.Discovery{MAC: c.mac, ClientUUID: c.uuidString(), Arch: c.archName()}}
	case !ok:
		return decision{why: "no boot entry for this MAC"}
	case !e.Ramdisk:
		return decision{why: e.NodeID + " boots from its local disk"}
	}
	file := s.bootFile(c)
	if file == "" {
		return decision{why: "no iPXE build for architecture " + c.archName()}
	}
	r, err := s.reply(req, c, file)
	if err != nil {
		return decision{why: "cannot build the reply: " + err.Error()}
	}
	return decision{reply: r, file: file}
}

// pxeClient reads the PXE client out of req, or says why req is not one
// this proxy answers: a DISCOVER on 67 or a REQUEST on 4011 from an
// Ethernet client whose vendor class starts with PXEClient. Everything
// else (REQUESTs on 67 for another server's lease, releases, non-PXE
// clients) belongs to the DHCP server that leases addresses.
func pxeClient(req *dhcpv4.DHCPv4, port int) (*client, string) {
	want := dhcpv4.MessageTypeNone
	switch port {
	case DHCPPort:
		want = dhcpv4.MessageTypeDiscover
	case ProxyPort:
		want = dhcpv4.MessageTypeRequest
	}
	switch {
	case req.OpCode != dhcpv4.OpcodeBootRequest:
		return nil, "not a BOOTREQUEST"
	case req.HWType != iana.HWTypeEthernet || len(req.ClientHWAddr) != 6:
		return nil, "not an Ethernet client"
	case want == dhcpv4.MessageTypeNone || req.MessageType() != want:
		return nil, "a " + req.MessageType().String() + " on port " + strconv.Itoa(port) + " is for the leasing DHCP server"
	case !strings.HasPrefix(req.ClassIdentifier(), "PXEClient"):
		return nil, "not a PXE client (vendor class " + strconv.Quote(req.ClassIdentifier()) + ")"
	}
	c := &client{mac: req.ClientHWAddr.String(), ipxe: slices.Contains(req.UserClass(), "iPXE")}
	if archs := req.ClientArch(); len(archs) > 0 {
		c.arch, c.hasArch = archs[0], true
	}
	if u := req.GetOneOption(dhcpv4.OptionClientMachineIdentifier); len(u) == 17 && u[0] == 0 {
		c.uuid = u
	}
	return c, ""
}

// bootFile is what the client loads next: iPXE gets its per-MAC script
// over HTTP, firmware the iPXE build for its architecture over TFTP, and
// an architecture without one gets nothing.
func (s settings) bootFile(c *client) string {
	switch {
	case c.ipxe:
		return s.BootURL + "/ipxe?mac=" + c.mac
	case !c.hasArch:
		return ""
	case c.arch == iana.INTEL_X86PC:
		return s.BIOSFile
	case c.arch == iana.EFI_X86_64 || c.arch == iana.EFI_BC:
		return s.EFIFile
	}
	return ""
}

// reply builds the OFFER (to a DISCOVER) or ACK (to a REQUEST): no address
// (yiaddr 0), this server as next server and identifier, vendor class
// PXEClient so the firmware takes it for a proxy offer, the client's UUID
// echoed, and PXE discovery control 8 (option 43): boot the file named
// here, no boot-server discovery or menu.
func (s settings) reply(req *dhcpv4.DHCPv4, c *client, file string) (*dhcpv4.DHCPv4, error) {
	mt := dhcpv4.MessageTypeOffer
	if req.MessageType() == dhcpv4.MessageTypeRequest {
		mt = dhcpv4.MessageTypeAck
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(mt),
		dhcpv4.WithServerIP(s.ServerIP),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.ServerIP)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient")),
		dhcpv4.WithGeneric(dhcpv4.OptionVendorSpecificInformation, []byte{6, 1, 8, 255}),
	}
	if c.uuid != nil {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, c.uuid))
	}
	r, err := dhcpv4.NewReplyFromRequest(req, mods...)
	if err != nil {
		return nil, err
	}
	// The header's file field holds 127 bytes and a NUL; a longer URL goes
	// in option 67, which iPXE and firmware read first.
	if len(file) < 128 {
		r.BootFileName = file
	} else {
		r.UpdateOption(dhcpv4.OptBootFileName(file))
	}
	return r, nil
}

// destination is where the reply to a request from peer goes: through the
// relay that forwarded it, back to the address a client with one sent
// from, else broadcast on the link (a PXE client has no address yet).
func destination(req *dhcpv4.DHCPv4, peer *net.UDPAddr) *net.UDPAddr {
	if gi := req.GatewayIPAddr; gi != nil && !gi.IsUnspecified() {
		return &net.UDPAddr{IP: gi, Port: DHCPPort}
	}
	if peer != nil && peer.IP != nil && !peer.IP.IsUnspecified() && !peer.IP.Equal(net.IPv4bcast) && peer.Port != 0 {
		return peer
	}
	return &net.UDPAddr{IP: net.IPv4bcast, Port: ClientPort}
}

func (c *client) uuidString() string {
	if c.uuid == nil {
		return ""
	}
	u := c.uuid[1:]
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (c *client) archName() string {
	if !c.hasArch {
		return ""
	}
	return c.arch.String()
}
