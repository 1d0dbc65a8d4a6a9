package pxe

import (
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// FuzzDecide feeds the proxy's packet logic whatever arrives on its ports:
// it must not panic, and it answers only a PXE DISCOVER on 67 or REQUEST on
// 4011 from a MAC whose entry boots the ramdisk, with an OFFER or ACK that
// leases nothing, never a NAK.
func FuzzDecide(f *testing.F) {
	for _, r := range []*dhcpv4.DHCPv4{
		request(1, dhcpv4.MessageTypeDiscover, "PXEClient:Arch:00000:UNDI:002001", 0, ""),
		request(1, dhcpv4.MessageTypeRequest, "PXEClient:Arch:00007:UNDI:003016", 7, ""),
		request(1, dhcpv4.MessageTypeDiscover, "PXEClient", 0, "iPXE"),
		request(3, dhcpv4.MessageTypeDiscover, "PXEClient", 9, ""),
		request(2, dhcpv4.MessageTypeDiscover, "PXEClient", 0, ""),
	} {
		b := r.ToBytes()
		f.Add(b, true)
		f.Add(b, false)
		f.Add(b[:len(b)/2], true) // truncated
	}
	odd := request(1, dhcpv4.MessageTypeDiscover, "PXEClient", 0, "")
	odd.Options[uint8(dhcpv4.OptionClientSystemArchitectureType.Code())] = []byte{7}          // odd-length arch list
	odd.Options[uint8(dhcpv4.OptionClientMachineIdentifier.Code())] = []byte{1, 2, 3}         // a short UUID
	odd.Options[uint8(dhcpv4.OptionUserClassInformation.Code())] = []byte{200, 'i', 'P', 'X'} // a bad RFC 3004 length
	f.Add(odd.ToBytes(), true)
	f.Add([]byte{}, true)
	f.Add(make([]byte, 240), true)
	f.Fuzz(func(t *testing.T, b []byte, onDHCPPort bool) {
		req, err := dhcpv4.FromBytes(b)
		if err != nil {
			return // the server drops what does not parse
		}
		port := ProxyPort
		if onDHCPPort {
			port = DHCPPort
		}
		d := decide(req, port, testLookup, testSettings)
		if d.reply == nil {
			checkSilence(t, req, port, d)
			return
		}
		checkReply(t, req, port, d.reply)
	})
}

// mayAnswer is, independently of decide, when an answer is allowed.
func mayAnswer(req *dhcpv4.DHCPv4, port int) bool {
	want := dhcpv4.MessageTypeDiscover
	if port == ProxyPort {
		want = dhcpv4.MessageTypeRequest
	}
	e, ok := testLookup(req.ClientHWAddr.String())
	return req.OpCode == dhcpv4.OpcodeBootRequest && req.HWType == iana.HWTypeEthernet && len(req.ClientHWAddr) == 6 &&
		req.MessageType() == want && strings.HasPrefix(req.ClassIdentifier(), "PXEClient") && ok && e.Ramdisk
}

func checkReply(t *testing.T, req *dhcpv4.DHCPv4, port int, r *dhcpv4.DHCPv4) {
	t.Helper()
	if !mayAnswer(req, port) {
		t.Fatalf("decide(%s on %d) answered %s; it must stay silent", req.Summary(), port, r.Summary())
	}
	mt := r.MessageType()
	if (mt != dhcpv4.MessageTypeOffer && mt != dhcpv4.MessageTypeAck) || !r.YourIPAddr.IsUnspecified() ||
		r.TransactionID != req.TransactionID || r.OpCode != dhcpv4.OpcodeBootReply {
		t.Fatalf("decide(%s) = %s; want an OFFER or ACK with yiaddr 0 and the request's xid", req.Summary(), r.Summary())
	}
	back, err := dhcpv4.FromBytes(r.ToBytes())
	if err != nil || back.BootFileName != r.BootFileName || back.MessageType() != mt {
		t.Fatalf("the reply does not survive the wire: %v", err)
	}
}

func checkSilence(t *testing.T, req *dhcpv4.DHCPv4, port int, d decision) {
	t.Helper()
	if d.discovered == nil {
		return
	}
	_, known := testLookup(req.ClientHWAddr.String())
	if known || port != DHCPPort || req.MessageType() != dhcpv4.MessageTypeDiscover || d.discovered.MAC != req.ClientHWAddr.String() {
		t.Fatalf("decide(%s on %d) recorded %+v; only an unknown MAC's DISCOVER on 67 is a discovery", req.Summary(), port, d.discovered)
	}
}
