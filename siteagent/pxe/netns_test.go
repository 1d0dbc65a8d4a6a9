package pxe

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/siteagent/boot"
)

// fullLab reports whether to run the whole matrix (task test-netboot sets
// BC_NETBOOT=full); ./run test runs a shorter one.
func fullLab() bool { return os.Getenv("BC_NETBOOT") == "full" }

// pxeCase is one simulated machine PXE-booting.
type pxeCase struct {
	name   string
	mac    string
	arch   uint16 // option 93
	uuid   string // option 97's 16 bytes, hex
	ipxe   bool   // user class iPXE: iPXE asking, not firmware
	want   string // the boot file we answer, "" for no answer
	record bool   // recorded as a PXE discovery
}

func (c pxeCase) vendor() string { return fmt.Sprintf("PXEClient:Arch:%05d:UNDI:002001", c.arch) }

const (
	macBIOS    = "52:54:00:bc:00:01"
	macEFI     = "52:54:00:bc:00:07"
	macIPXE    = "52:54:00:bc:00:0a"
	macLocal   = "52:54:00:bc:00:0d"
	macUnknown = "52:54:00:bc:00:ff"
)

var pxeCases = []pxeCase{
	{name: "bios", mac: macBIOS, arch: 0, uuid: "00112233445566778899aabbccddee01", want: "undionly.kpxe"},
	{name: "uefi", mac: macEFI, arch: 7, uuid: "00112233445566778899aabbccddee07", want: "snponly.efi"},
	{name: "ipxe", mac: macIPXE, arch: 0, uuid: "00112233445566778899aabbccddee0a", ipxe: true,
		want: "http://" + srvIP + ":8080/ipxe?mac=" + macIPXE},
	{name: "local", mac: macLocal, arch: 7, uuid: "00112233445566778899aabbccddee0d"},
	{name: "unknown", mac: macUnknown, arch: 7, uuid: "00112233445566778899aabbccddeeff", record: true},
}

// labTable writes the boot table our proxy serves: the ramdisk for the
// BIOS, UEFI and iPXE machines, the local disk for one, none for the last.
func labTable(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boot.json")
	tab, err := boot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, mac := range []string{macBIOS, macEFI, macIPXE} {
		e := kinds.BootEntry{NodeID: fmt.Sprintf("node_%d", i), MACs: []string{mac}, Ramdisk: true, DiscoveryToken: "bcdisc_x"}
		if err := tab.SetEntry(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tab.SetEntry(kinds.BootEntry{NodeID: "node_local", MACs: []string{macLocal}}); err != nil {
		t.Fatal(err)
	}
	return path
}

// answer is what a PXE client ends up with from a proxy: the offer on 67
// and, as firmware does, the proxy's ACK on 4011.
type answer struct {
	BootFile    string // from the offer, else from the 4011 ACK
	NextServer  string // siaddr, where TFTP is
	VendorClass string // option 60: PXEClient marks a proxy offer
	UUID        string // option 97 echoed
	AckBootFile string // the 4011 ACK's file
}

// TestProxyDHCPRealClients runs udhcpc (and, in the full run, dhclient)
// as PXE clients against our proxy and then against dnsmasq in proxy mode
// with the same boot decisions, beside a dnsmasq that leases addresses,
// and compares what the clients got field by field.
func TestProxyDHCPRealClients(t *testing.T) {
	needLab(t)
	l := newLab(t)
	leaser := l.startLeaser()
	capt := l.capture("client")
	clients := []string{"udhcpc"}
	if fullLab() {
		clients = append(clients, "dhclient")
	}

	tablePath := labTable(t)
	ours, _ := l.serveOurs(tablePath)
	got := map[string]answer{}
	for _, c := range pxeCases {
		for _, cl := range clients {
			got[c.name+"/"+cl] = l.ask(capt, cl, c, srvIP)
		}
	}
	l.plainClientLeases(capt)
	ourReplies := capt.packets(from(srvIP))
	ours.stop()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("our proxy's log:\n%s", ours.out)
		}
	})
	checkOnlyProxyReplies(t, ourReplies)
	checkDiscoveries(t, tablePath)

	ref := l.startReferenceProxy()
	want := map[string]answer{}
	for _, c := range pxeCases {
		for _, cl := range clients {
			want[c.name+"/"+cl] = l.ask(capt, cl, c, srvIP)
		}
	}
	ref.stop()

	for _, c := range pxeCases {
		for _, cl := range clients {
			k := c.name + "/" + cl
			t.Logf("%s: ours %+v, dnsmasq %+v", k, got[k], want[k])
			if got[k].BootFile != c.want {
				t.Errorf("%s: our boot file = %q, want %q", k, got[k].BootFile, c.want)
			}
			// dnsmasq names the file only in its 4011 ACK; we name it in both.
			if diff := cmp.Diff(want[k], got[k], cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".AckBootFile" }, cmp.Ignore())); diff != "" {
				t.Errorf("%s: our answer differs from dnsmasq's (-dnsmasq +ours):\n%s", k, diff)
			}
		}
	}
	if t.Failed() {
		t.Logf("leaser log:\n%s\nreference log:\n%s", leaser.out, ref.out)
	}
}

// ask runs client as the PXE machine c until the proxy at server answered
// (or a quiet window passed), then does the firmware's 4011 step.
func (l *lab) ask(capt *capture, client string, c pxeCase, server string) answer {
	l.t.Helper()
	l.setMAC(c.mac)
	t0 := time.Now()
	p := l.start("client", nil, l.clientArgs(client, c)...)
	offer := waitOffer(capt, t0, server, c.mac, time.Second)
	p.stop()
	if offer == nil {
		return answer{}
	}
	a := answer{BootFile: offer.BootFileName, NextServer: offer.ServerIPAddr.String(),
		VendorClass: offer.ClassIdentifier(), UUID: hex.EncodeToString(offer.GetOneOption(dhcpv4.OptionClientMachineIdentifier))}
	ack, err := l.proxyRequest(c, offer, server)
	if err != nil {
		l.t.Errorf("%s/%s: the 4011 request: %v", c.name, client, err)
		return a
	}
	a.AckBootFile = ack.BootFileName
	if a.BootFile == "" {
		a.BootFile = ack.BootFileName
		if !ack.ServerIPAddr.IsUnspecified() {
			a.NextServer = ack.ServerIPAddr.String()
		}
	}
	return a
}

// waitOffer waits for an OFFER from server to mac on port 68; nil if none
// came within window after the client's first DISCOVER.
func waitOffer(capt *capture, t0 time.Time, server, mac string, window time.Duration) *dhcpv4.DHCPv4 {
	deadline := time.Now().Add(5 * time.Second)
	var sawDiscover time.Time
	for time.Now().Before(deadline) {
		for _, p := range capt.packets(since(t0)) {
			switch {
			case p.outgoing && p.msg.MessageType() == dhcpv4.MessageTypeDiscover && sawDiscover.IsZero():
				sawDiscover = p.at
				deadline = p.at.Add(window)
			case !p.outgoing && p.src.Equal(net.ParseIP(server)) && p.dport == ClientPort &&
				p.msg.MessageType() == dhcpv4.MessageTypeOffer && p.msg.ClientHWAddr.String() == mac:
				return p.msg
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// checkOnlyProxyReplies checks that our proxy sent OFFERs and ACKs only,
// never an address, and nothing to a request on 67 for the leaser.
func checkOnlyProxyReplies(t *testing.T, replies []packet) {
	t.Helper()
	if len(replies) == 0 {
		t.Fatal("our proxy sent nothing at all")
	}
	for _, p := range replies {
		mt := p.msg.MessageType()
		ok := (mt == dhcpv4.MessageTypeOffer && p.sport == DHCPPort) || (mt == dhcpv4.MessageTypeAck && p.sport == ProxyPort)
		if !ok || !p.msg.YourIPAddr.IsUnspecified() {
			t.Errorf("our proxy sent a %s from port %d with yiaddr %s to %s; want OFFERs from 67 and ACKs from 4011, yiaddr 0",
				mt, p.sport, p.msg.YourIPAddr, p.msg.ClientHWAddr)
		}
	}
}

// checkDiscoveries checks that the unknown MAC, and only it, was recorded
// with its UUID and architecture.
func checkDiscoveries(t *testing.T, tablePath string) {
	t.Helper()
	tab, err := boot.Open(tablePath, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds := tab.Discoveries()
	if len(ds) != 1 || ds[0].MAC != macUnknown || ds[0].ClientUUID != "00112233-4455-6677-8899-aabbccddeeff" || ds[0].Arch != "EFI x86-64" {
		t.Errorf("Discoveries() = %+v, want only %s with UUID 00112233-4455-6677-8899-aabbccddeeff and arch EFI x86-64", ds, macUnknown)
	}
}

// plainClientLeases runs udhcpc without PXE options, as a machine's OS
// would, with the MAC of a machine whose entry boots the ramdisk: it gets
// its lease from the leaser, and our proxy sends it nothing (no offer, no
// ACK, no NAK).
func (l *lab) plainClientLeases(capt *capture) {
	l.t.Helper()
	l.setMAC(macBIOS)
	t0 := time.Now()
	dir := l.t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && echo \"bound $ip from $serverid\" > "+dir+"/bound\n"), 0o755); err != nil {
		l.t.Fatal(err)
	}
	out, err := l.run(15*time.Second, "client", "udhcpc", "-i", "eth0", "-f", "-q", "-n", "-t", "3", "-T", "1", "-s", script)
	bound, _ := os.ReadFile(filepath.Join(dir, "bound"))
	if err != nil || !strings.HasPrefix(string(bound), "bound 10.77.0.1") || !strings.Contains(string(bound), "from "+leaserIP) {
		l.t.Errorf("udhcpc without PXE options = %v, bound %q, want a lease from %s:\n%s", err, bound, leaserIP, out)
	}
	if ours := capt.packets(func(p packet) bool { return since(t0)(p) && from(srvIP)(p) }); len(ours) != 0 {
		l.t.Errorf("our proxy sent %d packets to a client without PXE options (first: %s), want none", len(ours), ours[0].msg.MessageType())
	}
}
