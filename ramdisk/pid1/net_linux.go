package pid1

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/u-root/u-root/pkg/dhclient"
	"github.com/vishvananda/netlink"
)

// network brings lo up, waits for the boot interface (the one with mac; any
// Ethernet interface when the command line names none) and configures it
// from the first DHCP lease, in at most dhcpRounds attempts.
func network(ctx context.Context, cfg *Config, mac net.HardwareAddr) error {
	if lo, err := netlink.LinkByName("lo"); err == nil {
		_ = netlink.LinkSetUp(lo)
	}
	links, err := bootLinks(ctx, mac)
	if err != nil {
		return err
	}
	names := make([]string, len(links))
	for i, l := range links {
		names[i] = l.Attrs().Name + " " + l.Attrs().HardwareAddr.String()
	}
	var last error
	for round := 1; round <= dhcpRounds; round++ {
		cfg.say("DHCP on %s (attempt %d of %d)", strings.Join(names, ", "), round, dhcpRounds)
		if last = lease(ctx, cfg, links); last == nil {
			return nil
		}
		cfg.say("DHCP: %v", last)
	}
	return fmt.Errorf("no DHCP lease on %s after %d attempts (last: %v); check the provisioning network's DHCP server and the cabling",
		strings.Join(names, ", "), dhcpRounds, last)
}

// bootLinks waits up to linkWait for the interface with mac (or for any
// Ethernet interface when mac is nil).
func bootLinks(ctx context.Context, mac net.HardwareAddr) ([]netlink.Link, error) {
	deadline := time.Now().Add(linkWait)
	for {
		all, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("list network interfaces: %w", err)
		}
		var found []netlink.Link
		var seen []string
		for _, l := range all {
			a := l.Attrs()
			if a.EncapType != "ether" || len(a.HardwareAddr) != 6 {
				continue
			}
			seen = append(seen, a.Name+" "+a.HardwareAddr.String())
			if mac == nil || bytes.Equal(a.HardwareAddr, mac) {
				found = append(found, l)
			}
		}
		if len(found) > 0 {
			return found, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			want := "no Ethernet interface"
			if mac != nil {
				want = "the boot interface " + mac.String() + " (BOOTIF)"
			}
			return nil, fmt.Errorf("%s did not appear within %v (interfaces seen: [%s]); is its driver in the initramfs (initramfs.Modules)?",
				want, linkWait, strings.Join(seen, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lease asks for a lease on links and configures the first one granted.
func lease(ctx context.Context, cfg *Config, links []netlink.Link) error {
	c := dhclient.Config{Timeout: dhcpTimeout, Retries: 2, LogLevel: dhclient.LogInfo,
		Modifiers4: []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("better-compute-ramdisk"))}}
	ctx, cancel := context.WithTimeout(ctx, 3*dhcpTimeout+linkWait)
	defer cancel()
	var errs []string
	for r := range dhclient.SendRequests(ctx, links, true, false, c, linkWait) {
		name := r.Interface.Attrs().Name
		if r.Err != nil {
			errs = append(errs, name+": "+r.Err.Error())
			continue
		}
		if err := r.Lease.Configure(); err != nil {
			errs = append(errs, name+": configure: "+err.Error())
			continue
		}
		m, _ := r.Lease.Message()
		cfg.say("%s is %s/%d, router %v, from DHCP server %v", name, m.YourIPAddr, maskBits(m.SubnetMask()), m.Router(), m.ServerIdentifier())
		return nil
	}
	if len(errs) == 0 {
		return fmt.Errorf("no interface came up within %v", linkWait)
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

func maskBits(m net.IPMask) int {
	n, _ := m.Size()
	return n
}
