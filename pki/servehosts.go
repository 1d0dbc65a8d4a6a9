package pki

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// MaxServeHosts bounds the names and addresses a site declares for its
// serving certificates.
const MaxServeHosts = 16

// ServeHostRule is what a site agent's serving certificate may name. A
// serving certificate is CA-signed, so without a rule a site could be
// certified for the control plane's name, for loopback (where a lab's
// control plane listens) or for thousands of names.
type ServeHostRule struct {
	// Reserved are the control plane's and Temporal's names and addresses:
	// never a site's. Loopback ones among them are left to LoopbackLab.
	Reserved []string
	// LoopbackLab allows loopback names and addresses: the site is a lab
	// whose agent shares a host with the control plane.
	LoopbackLab bool
	// Declared, when not nil, are the only names allowed: what the site
	// declared at its join, for a renewal.
	Declared []string
}

// Check returns hosts in canonical form (lowercase names without a final
// dot, IP addresses as netip prints them), without duplicates. A malformed
// host or too many are INVALID_INPUT serveHosts; a host the rule refuses is
// PERMISSION_DENIED naming it.
func (r ServeHostRule) Check(hosts []string) ([]string, error) {
	if len(hosts) > MaxServeHosts {
		return nil, errs.Invalid("serveHosts", "%d serve hosts; a site declares at most %d", len(hosts), MaxServeHosts)
	}
	reserved := make(map[string]bool, len(r.Reserved))
	for _, h := range r.Reserved {
		if c, err := CanonicalHost(h); err == nil && !IsLoopbackHost(c) {
			reserved[c] = true
		}
	}
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		c, err := CanonicalHost(h)
		if err != nil {
			return nil, err
		}
		if err := r.allow(c, reserved); err != nil {
			return nil, err
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (r ServeHostRule) allow(c string, reserved map[string]bool) error {
	switch {
	case reserved[c]:
		return errs.New(errs.PermissionDenied,
			"serve host %s is the control plane's or Temporal's; a site's serving certificate never names it", short(c))
	case IsLoopbackHost(c) && !r.LoopbackLab:
		return errs.New(errs.PermissionDenied,
			"serve host %s is loopback; only a site created as a loopback lab (sites create --loopback-lab) may use it", short(c))
	case r.Declared != nil && !slices.Contains(r.Declared, c):
		return errs.New(errs.PermissionDenied,
			"serve host %s was not declared at the site's join (declared: %s); join again with a new site token to change them",
			short(c), strings.Join(r.Declared, ", "))
	}
	return nil
}

// CanonicalHost returns a DNS name or IP address in the form certificates
// carry it. An address with a zone, an unspecified, multicast or broadcast
// address, and anything not a lowercase DNS name are INVALID_INPUT
// serveHosts.
func CanonicalHost(h string) (string, error) { return canonicalHost("serveHosts", h) }

func canonicalHost(field, h string) (string, error) {
	if a, err := netip.ParseAddr(h); err == nil {
		a = a.Unmap()
		if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return "", errs.Invalid(field, "%s is not a unicast IP address without a zone", short(h))
		}
		return a.String(), nil
	}
	name := strings.TrimSuffix(h, ".")
	if ValidateTrustDomain(name) != nil {
		return "", errs.Invalid(field, "host %s is neither an IP address nor a lowercase DNS name", short(h))
	}
	return name, nil
}

// IsLoopbackHost reports whether a canonical host is loopback: 127.0.0.0/8,
// ::1, localhost or a name under .localhost (RFC 6761).
func IsLoopbackHost(c string) bool {
	if a, err := netip.ParseAddr(c); err == nil {
		return a.IsLoopback()
	}
	return c == "localhost" || strings.HasSuffix(c, ".localhost")
}
