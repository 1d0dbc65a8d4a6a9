package pid1

import (
	"fmt"
	"net"
	"strings"
)

// BootMAC returns the MAC of the interface the machine booted from, as the
// site's iPXE script puts it on the kernel command line: BOOTIF=01-aa-bb-…
// (pxelinux's form: ARP hardware type 1, Ethernet, then the address). It
// returns nil without BOOTIF; a malformed BOOTIF is an error.
func BootMAC(cmdline string) (net.HardwareAddr, error) {
	var v string
	found := false
	for _, w := range strings.Fields(cmdline) {
		if k, val, _ := strings.Cut(w, "="); k == "BOOTIF" {
			if found {
				return nil, fmt.Errorf("BOOTIF appears twice on the kernel command line")
			}
			v, found = val, true
		}
	}
	if !found {
		return nil, nil
	}
	hex, ok := strings.CutPrefix(strings.ToLower(v), "01-")
	mac, err := net.ParseMAC(strings.ReplaceAll(hex, "-", ":"))
	if !ok || err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("BOOTIF=%q is not 01- and an Ethernet MAC in dashes (01-aa-bb-cc-dd-ee-ff)", v)
	}
	return mac, nil
}
