package site

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// checkBMCNetwork refuses a BMC address outside the site's BMC networks
// (bcd site --bmc-network) before any credential is resolved, so a node
// enrolled with a BMC address its enroller controls gets nothing from the
// agent. A name must resolve only to addresses inside them. With no
// networks configured every address is allowed, as before.
func (a *Activities) checkBMCNetwork(ctx context.Context, addr bmc.Address) error {
	if len(a.BMCNetworks) == 0 {
		return nil
	}
	ips, err := a.resolveBMC(ctx, addr.Host)
	if err != nil {
		return errs.Wrap(errs.DriverError, err, "cannot resolve BMC host %s", addr.Host)
	}
	for _, ip := range ips {
		if !a.inBMCNetworks(ip) {
			return errs.New(errs.PermissionDenied,
				"BMC address %s (%s) is outside this site's BMC networks (%s): the site agent sends it no credentials; fix the node's BMC address, or add its network with 'bcd site --bmc-network CIDR'",
				addr.Host, ip, a.bmcNetworkList())
		}
	}
	return nil
}

func (a *Activities) resolveBMC(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func (a *Activities) inBMCNetworks(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range a.BMCNetworks {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (a *Activities) bmcNetworkList() string {
	s := make([]string, len(a.BMCNetworks))
	for i, p := range a.BMCNetworks {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// ParseBMCNetworks parses bcd site's --bmc-network values (CIDRs), naming
// the bad one.
func ParseBMCNetworks(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		p, err := netip.ParsePrefix(strings.TrimSpace(v))
		if err != nil {
			return nil, errs.Invalid("bmc-network", "%q is not a CIDR such as 10.20.0.0/16", v)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
