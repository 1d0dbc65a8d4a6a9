package pxe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// fakeIPXE writes two small files standing in for the iPXE builds.
func fakeIPXE(t *testing.T) (bios, efi string) {
	t.Helper()
	dir := t.TempDir()
	bios, efi = filepath.Join(dir, "undionly.kpxe"), filepath.Join(dir, "snponly.efi")
	for _, f := range []string{bios, efi} {
		if err := os.WriteFile(f, []byte("ipxe build "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return bios, efi
}

// TestListenRefusesBadConfig: a mistake in the configuration stops the
// agent at start with the thing named and the fix.
func TestListenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	bios, efi := fakeIPXE(t)
	missing := filepath.Join(t.TempDir(), "undionly.kpxe")
	empty := filepath.Join(t.TempDir(), "snponly.efi")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want []string // in the message
	}{
		{"no interface", Config{Interface: "bcpx-nope0", BIOSFile: bios, EFIFile: efi},
			[]string{"INVALID_INPUT pxe-interface", `"bcpx-nope0" does not exist`, "--pxe-interface"}},
		{"BIOS build missing", Config{Interface: "lo", BIOSFile: missing, EFIFile: efi},
			[]string{"INVALID_INPUT ipxe-bios", missing, "no such file", "apt-get install ipxe", "--ipxe-bios"}},
		{"EFI build empty", Config{Interface: "lo", BIOSFile: bios, EFIFile: empty},
			[]string{"INVALID_INPUT ipxe-efi", empty, "empty", "apt-get install ipxe"}},
		{"same name twice", Config{Interface: "lo", BIOSFile: bios, EFIFile: bios},
			[]string{"INVALID_INPUT ipxe-efi", "both named undionly.kpxe"}},
		{"server address not v4", Config{Interface: "lo", ServerAddr: "fe80::1", BIOSFile: bios, EFIFile: efi},
			[]string{"INVALID_INPUT pxe-server-addr", "not an IPv4 address"}},
		{"server address not on the interface", Config{Interface: "lo", ServerAddr: "192.0.2.7", BIOSFile: bios, EFIFile: efi},
			[]string{"INVALID_INPUT pxe-server-addr", "192.0.2.7 is not an address of lo"}},
	}
	for _, tt := range tests {
		s, err := Listen(tt.cfg, nil)
		if err == nil {
			s.Close()
			t.Errorf("%s: Listen(%+v) = nil error, want one naming %q", tt.name, tt.cfg, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Listen(%+v) = %q, want it to say %q", tt.name, tt.cfg, err, w)
			}
		}
		if !errs.Is(err, errs.InvalidInput) {
			t.Errorf("%s: Listen() kind = %s, want INVALID_INPUT", tt.name, errs.KindOf(err))
		}
	}
}

// TestListenRefusesTakenPortsInLab: a DHCP server, or a TFTP server,
// already on the provisioning interface stops our start with the port
// named; so does an interface without an IPv4 address.
func TestListenRefusesTakenPortsInLab(t *testing.T) {
	needLab(t)
	l := newLab(t)
	tab := labTable(t)
	l.must("ip", "-n", l.ns("srv"), "link", "add", "noaddr0", "type", "veth", "peer", "name", "noaddr1")
	if _, line := l.serveOurs(tab, "BCPX_IFACE=noaddr0"); !strings.Contains(line, "noaddr0 has no IPv4 address") {
		t.Errorf("our proxy on an interface without IPv4 = %q, want it refused naming noaddr0", line)
	}

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a DHCP server", []string{"--dhcp-range=10.77.0.100,10.77.0.199,1h"}, "port 67/udp on eth0 is taken"},
		{"a TFTP server", []string{"--enable-tftp", "--tftp-root=" + t.TempDir()}, "port 69/udp on eth0 is taken"},
	} {
		other := l.start("srv", nil, append(l.dnsmasqBase(), tt.args...)...)
		if _, err := other.waitFor(dnsmasqStarted, 10*time.Second); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		_, line := l.serveOurs(tab)
		t.Logf("beside %s: %s", tt.name, line)
		if !strings.Contains(line, tt.want) || !strings.Contains(line, "ss -ulpn") {
			t.Errorf("our proxy beside %s = %q, want %q and how to find it", tt.name, line, tt.want)
		}
		other.stop()
	}
	p, line := l.serveOurs(tab)
	if !strings.HasPrefix(line, "ready "+srvIP) {
		t.Errorf("our proxy alone = %q, want ready on %s", line, srvIP)
	}
	p.stop()
}
