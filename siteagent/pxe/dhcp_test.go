package pxe

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/siteagent/boot"
)

var testSettings = settings{ServerIP: net.IPv4(10, 0, 0, 2).To4(), BootURL: "http://10.0.0.2:8080",
	BIOSFile: "undionly.kpxe", EFIFile: "snponly.efi"}

// testLookup is a boot table: a ramdisk entry for ...:01 and a local one
// for ...:02.
func testLookup(mac string) (kinds.BootEntry, bool) {
	switch mac {
	case "52:54:00:00:00:01":
		return kinds.BootEntry{NodeID: "node_a", MACs: []string{mac}, Ramdisk: true, DiscoveryToken: "t"}, true
	case "52:54:00:00:00:02":
		return kinds.BootEntry{NodeID: "node_b", MACs: []string{mac}}, true
	}
	return kinds.BootEntry{}, false
}

var testUUID = []byte{0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01}

// request builds a client's request: mac's last byte, message type,
// vendor class, architecture (-1 for none), user class.
func request(last byte, mt dhcpv4.MessageType, vendor string, arch int, userClass string) *dhcpv4.DHCPv4 {
	mods := []dhcpv4.Modifier{dhcpv4.WithMessageType(mt), dhcpv4.WithTransactionID(dhcpv4.TransactionID{1, 2, 3, 4}),
		dhcpv4.WithHwAddr(net.HardwareAddr{0x52, 0x54, 0, 0, 0, last}),
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, testUUID)}
	if vendor != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptClassIdentifier(vendor)))
	}
	if arch >= 0 {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{byte(arch >> 8), byte(arch)}))
	}
	if userClass != "" {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte(userClass)))
	}
	r, err := dhcpv4.New(mods...)
	if err != nil {
		panic(err)
	}
	return r
}

// answerOf is what a test compares of a decision.
type answerOf struct {
	Type, File, Siaddr, Yiaddr, ServerID, Vendor, Opt43, UUID string
	Discovered                                                *boot.Discovery
}

func summarize(d decision) answerOf {
	a := answerOf{Discovered: d.discovered}
	if r := d.reply; r != nil {
		a.Type, a.File, a.Siaddr, a.Yiaddr = r.MessageType().String(), r.BootFileName, r.ServerIPAddr.String(), r.YourIPAddr.String()
		a.ServerID, a.Vendor = r.ServerIdentifier().String(), r.ClassIdentifier()
		a.Opt43 = string(r.GetOneOption(dhcpv4.OptionVendorSpecificInformation))
		a.UUID = string(r.GetOneOption(dhcpv4.OptionClientMachineIdentifier))
	}
	return a
}

func offer(mt, file string) answerOf {
	return answerOf{Type: mt, File: file, Siaddr: "10.0.0.2", Yiaddr: "0.0.0.0", ServerID: "10.0.0.2",
		Vendor: "PXEClient", Opt43: "\x06\x01\x08\xff", UUID: string(testUUID)}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	const bios, efi = "PXEClient:Arch:00000:UNDI:002001", "PXEClient:Arch:00007:UNDI:003016"
	D, R, I := dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeInform
	tests := []struct {
		name string
		req  *dhcpv4.DHCPv4
		port int
		want answerOf
	}{
		{"BIOS firmware gets undionly.kpxe", request(1, D, bios, 0, ""), DHCPPort, offer("OFFER", "undionly.kpxe")},
		{"UEFI x86-64 gets the EFI build", request(1, D, efi, 7, ""), DHCPPort, offer("OFFER", "snponly.efi")},
		{"EFI BC (arch 9) too", request(1, D, efi, 9, ""), DHCPPort, offer("OFFER", "snponly.efi")},
		{"iPXE gets its script URL", request(1, D, bios, 0, "iPXE"), DHCPPort, offer("OFFER", "http://10.0.0.2:8080/ipxe?mac=52:54:00:00:00:01")},
		{"iPXE needs no architecture", request(1, D, "PXEClient", -1, "iPXE"), DHCPPort, offer("OFFER", "http://10.0.0.2:8080/ipxe?mac=52:54:00:00:00:01")},
		{"4011 REQUEST gets an ACK", request(1, R, efi, 7, ""), ProxyPort, offer("ACK", "snponly.efi")},
		{"a REQUEST on 67 is the leaser's", request(1, R, bios, 0, ""), DHCPPort, answerOf{}},
		{"a DISCOVER on 4011 is ignored", request(1, D, bios, 0, ""), ProxyPort, answerOf{}},
		{"an INFORM is ignored", request(1, I, bios, 0, ""), DHCPPort, answerOf{}},
		{"a non-PXE client is the leaser's", request(1, D, "udhcp 1.35.0", 0, ""), DHCPPort, answerOf{}},
		{"no vendor class", request(1, D, "", 0, ""), DHCPPort, answerOf{}},
		{"HTTPClient is not served yet", request(1, D, "HTTPClient:Arch:00016", 16, ""), DHCPPort, answerOf{}},
		{"ARM64 UEFI has no build here", request(1, D, "PXEClient:Arch:00011", 11, ""), DHCPPort, answerOf{}},
		{"firmware without an architecture", request(1, D, bios, -1, ""), DHCPPort, answerOf{}},
		{"a local-boot entry gets nothing", request(2, D, bios, 0, ""), DHCPPort, answerOf{}},
		{"an unknown MAC is recorded, not answered", request(3, D, efi, 7, ""), DHCPPort, answerOf{Discovered: &boot.Discovery{
			MAC: "52:54:00:00:00:03", ClientUUID: "11223344-5566-7788-99aa-bbccddeeff01", Arch: "EFI x86-64"}}},
		{"an unknown MAC on 4011 is not recorded again", request(3, R, efi, 7, ""), ProxyPort, answerOf{}},
	}
	for _, tt := range tests {
		got := summarize(decide(tt.req, tt.port, testLookup, testSettings))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: decide() differs (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestDecideEchoesRequestFields(t *testing.T) {
	t.Parallel()
	req := request(1, dhcpv4.MessageTypeDiscover, "PXEClient:Arch:00000", 0, "")
	req.SetBroadcast()
	req.GatewayIPAddr = net.IPv4(10, 9, 0, 1)
	d := decide(req, DHCPPort, testLookup, testSettings)
	r := d.reply
	if r == nil || r.OpCode != dhcpv4.OpcodeBootReply || r.TransactionID != req.TransactionID || !r.IsBroadcast() ||
		r.ClientHWAddr.String() != req.ClientHWAddr.String() || !r.GatewayIPAddr.Equal(req.GatewayIPAddr) {
		t.Fatalf("decide(%s) = %v, want a BOOTREPLY with the request's xid, flags, chaddr and giaddr", req.Summary(), r)
	}
	long := testSettings
	long.BootURL = "http://boot.a-very-long-site-name.provisioning.example.test:8080/some/prefix/that/is/long/enough/to/pass/the/limit"
	req = request(1, dhcpv4.MessageTypeDiscover, "PXEClient", 0, "iPXE")
	r = decide(req, DHCPPort, testLookup, long).reply
	if want := long.BootURL + "/ipxe?mac=52:54:00:00:00:01"; r == nil || r.BootFileName != "" || r.BootFileNameOption() != want {
		t.Errorf("decide() with a %d-byte URL: file %q, option 67 %q; want the URL in option 67", len(want), r.BootFileName, r.BootFileNameOption())
	}
}

func TestDestination(t *testing.T) {
	t.Parallel()
	req := request(1, dhcpv4.MessageTypeDiscover, "PXEClient", 0, "")
	relayed := request(1, dhcpv4.MessageTypeDiscover, "PXEClient", 0, "")
	relayed.GatewayIPAddr = net.IPv4(10, 9, 0, 1)
	tests := []struct {
		req  *dhcpv4.DHCPv4
		peer *net.UDPAddr
		want string
	}{
		{req, &net.UDPAddr{IP: net.IPv4zero, Port: 68}, "255.255.255.255:68"},
		{req, nil, "255.255.255.255:68"},
		{req, &net.UDPAddr{IP: net.IPv4(10, 0, 0, 50), Port: 68}, "10.0.0.50:68"},
		{req, &net.UDPAddr{IP: net.IPv4(10, 0, 0, 50), Port: 1234}, "10.0.0.50:1234"},
		{relayed, &net.UDPAddr{IP: net.IPv4(10, 9, 0, 1), Port: 67}, "10.9.0.1:67"},
	}
	for _, tt := range tests {
		if got := destination(tt.req, tt.peer).String(); got != tt.want {
			t.Errorf("destination(giaddr %s, peer %v) = %s, want %s", tt.req.GatewayIPAddr, tt.peer, got, tt.want)
		}
	}
}
