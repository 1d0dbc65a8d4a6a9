package bmc

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// Driver names, as --bmc-driver takes them.
const (
	DriverRedfish = "redfish"
	DriverIPMI    = "ipmi"
)

// Address is a parsed BMC address. Its String form parses back to the same value.
type Address struct {
	Driver   string // DriverRedfish or DriverIPMI
	Scheme   string // redfish: "https" or "http"; ipmi: ""
	Host     string // an IP literal (no brackets, no zone) or a lowercase DNS name
	Port     int    // 0 means the driver's default (443, 80 or 623)
	SystemID string // redfish: the <id> of /redfish/v1/Systems/<id>, "" when not given
}

// systemsPrefix is where a Redfish service lists its computer systems.
const systemsPrefix = "/redfish/v1/Systems/"

// ParseAddress parses a BMC address for driver (DriverRedfish, DriverIPMI, or ""
// to take the driver from the scheme). It accepts the spec's forms:
//
//	10.20.0.14
//	bmc-r12-14.example:8443
//	https://192.168.122.1:8000/redfish/v1/Systems/<id>
//	redfish+http://127.0.0.1:8000/redfish/v1/Systems/1
//	ipmi://10.20.0.14:623
//
// and refuses anything else with INVALID_INPUT naming "bmc.address": unknown
// schemes, credentials in the URL, an empty or malformed host, a bad port,
// queries, percent-encoding, spaces and control characters. Error messages
// never repeat the whole input, which might hold a password.
func ParseAddress(driver, raw string) (Address, error) {
	switch driver {
	case "", DriverRedfish, DriverIPMI:
	default:
		return Address{}, errs.Invalid("bmc.driver", "unknown BMC driver %q: use redfish or ipmi", driver)
	}
	if err := checkChars(raw); err != nil {
		return Address{}, err
	}
	a := Address{Driver: driver}
	hostport, path := raw, ""
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		d, s, err := parseScheme(strings.ToLower(scheme))
		if err != nil {
			return Address{}, err
		}
		if driver != "" && driver != d {
			return Address{}, errs.Invalid("bmc.address", "scheme %s:// is for the %s driver, not %s", scheme, d, driver)
		}
		a.Driver, a.Scheme = d, s
		hostport, path = rest, ""
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			hostport, path = rest[:i], rest[i:]
		}
	} else {
		if strings.Contains(raw, "/") {
			return Address{}, errs.Invalid("bmc.address", "an address with a path needs a scheme, e.g. https://host/redfish/v1/Systems/<id>")
		}
		if driver == "" {
			return Address{}, errs.Invalid("bmc.driver", "give the BMC driver (redfish or ipmi) or a scheme such as https:// in the address")
		}
		if driver == DriverRedfish {
			a.Scheme = "https"
		}
	}
	var err error
	if a.Host, a.Port, err = splitHostPort(hostport); err != nil {
		return Address{}, err
	}
	if a.Port == a.defaultPort() { // one spelling per BMC: https://h and https://h:443 are one node
		a.Port = 0
	}
	if a.SystemID, err = parsePath(a.Driver, path); err != nil {
		return Address{}, err
	}
	return a, nil
}

// checkChars refuses what no BMC address holds: control characters, spaces,
// non-ASCII, credentials, queries and percent-encoding.
func checkChars(raw string) error {
	switch {
	case raw == "":
		return errs.Invalid("bmc.address", "the BMC address is empty: give an IP, host:port or a Redfish URL")
	case len(raw) > 1024:
		return errs.Invalid("bmc.address", "the BMC address is %d bytes long; the limit is 1024", len(raw))
	case strings.Contains(raw, "@"):
		return errs.Invalid("bmc.address", "the BMC address holds credentials (user@host); remove them and give them with --bmc-username/--bmc-password-file or --bmc-credentials")
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~:/[]+", c) >= 0:
		case c < 0x20 || c == 0x7f:
			return errs.Invalid("bmc.address", "the BMC address holds a control character at byte %d", i)
		case c >= 0x80:
			return errs.Invalid("bmc.address", "the BMC address holds a non-ASCII byte at %d (use punycode for international names)", i)
		default:
			return errs.Invalid("bmc.address", "the BMC address holds %q at byte %d; spaces, queries, fragments and percent-encoding are not allowed", string(c), i)
		}
	}
	return nil
}

// parseScheme maps a URL scheme to a driver and, for Redfish, the HTTP scheme.
func parseScheme(s string) (driver, httpScheme string, err error) {
	switch s {
	case "https", "redfish", "redfish+https":
		return DriverRedfish, "https", nil
	case "http", "redfish+http":
		return DriverRedfish, "http", nil
	case "ipmi":
		return DriverIPMI, "", nil
	}
	return "", "", errs.Invalid("bmc.address", "unknown scheme %q: use https://, http://, redfish+https://, redfish+http:// or ipmi://", s)
}

// splitHostPort splits host[:port], [v6]:port, [v6] or a bare IPv6 literal.
func splitHostPort(hp string) (string, int, error) {
	host, port := hp, ""
	switch {
	case strings.HasPrefix(hp, "["):
		end := strings.IndexByte(hp, ']')
		if end < 0 {
			return "", 0, errs.Invalid("bmc.address", "missing ] after an IPv6 address")
		}
		host, port = hp[1:end], hp[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return "", 0, errs.Invalid("bmc.address", "unexpected %q after ]", port)
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(hp, ":") {
			return "", 0, errs.Invalid("bmc.address", "empty port after ':'")
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.Is6() {
			return "", 0, errs.Invalid("bmc.address", "%q in brackets is not an IPv6 address", host)
		}
	case strings.Count(hp, ":") == 1:
		host, port, _ = strings.Cut(hp, ":")
		if port == "" {
			return "", 0, errs.Invalid("bmc.address", "empty port after ':'")
		}
	}
	h, err := checkHost(host)
	if err != nil {
		return "", 0, err
	}
	if port == "" {
		return h, 0, nil
	}
	p, err := parsePort(port)
	return h, p, err
}

func parsePort(s string) (int, error) {
	if len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, errs.Invalid("bmc.address", "port %q is not a number from 1 to 65535", s)
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, errs.Invalid("bmc.address", "port %q is not a number from 1 to 65535", s)
	}
	return p, nil
}

// checkHost returns host in canonical form: an IP literal as netip prints it, a
// name in lowercase.
func checkHost(host string) (string, error) {
	if host == "" {
		return "", errs.Invalid("bmc.address", "the BMC address has no host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.IsUnspecified() || ip.IsMulticast() || ip.Zone() != "" {
			return "", errs.Invalid("bmc.address", "host %s cannot be a BMC (unspecified, multicast or zoned address)", host)
		}
		return ip.Unmap().String(), nil // ::ffff:10.0.0.5 is 10.0.0.5
	}
	if strings.Contains(host, ":") {
		return "", errs.Invalid("bmc.address", "host %q is not a valid IPv6 address", host)
	}
	name := strings.ToLower(host)
	if len(name) > 253 {
		return "", errs.Invalid("bmc.address", "host name is longer than 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") ||
			strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return "", errs.Invalid("bmc.address", "host %q is neither an IP address nor a DNS name", host)
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", errs.Invalid("bmc.address", "host %q is not a valid IP address", host)
	}
	return name, nil
}

// parsePath returns the system id of a Redfish path, "" for the service root.
func parsePath(driver, path string) (string, error) {
	p := strings.TrimSuffix(path, "/")
	if p == "" {
		return "", nil
	}
	if driver != DriverRedfish {
		return "", errs.Invalid("bmc.address", "an %s address takes no path", driver)
	}
	if p == "/redfish/v1" {
		return "", nil
	}
	id, ok := strings.CutPrefix(p, systemsPrefix)
	if !ok || id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/[]") {
		return "", errs.Invalid("bmc.address", "path %q is not a Redfish system: use /redfish/v1/Systems/<id>", path)
	}
	return id, nil
}

// String returns the address in a form ParseAddress(a.Driver, …) reads back
// as a: a URL for Redfish, host[:port] for IPMI.
func (a Address) String() string {
	if a.Driver == DriverIPMI {
		if a.Port == 0 {
			return a.Host
		}
		return bracket(a.Host) + ":" + strconv.Itoa(a.Port)
	}
	s := a.Endpoint()
	if a.SystemID != "" {
		s += a.SystemPath()
	}
	return s
}

// Endpoint returns scheme://host[:port], the base URL of a Redfish service.
func (a Address) Endpoint() string {
	s := a.Scheme + "://" + bracket(a.Host)
	if a.Port != 0 {
		s += ":" + strconv.Itoa(a.Port)
	}
	return s
}

// SystemPath returns /redfish/v1/Systems/<id>, or "" when the address names no system.
func (a Address) SystemPath() string {
	if a.SystemID == "" {
		return ""
	}
	return systemsPrefix + a.SystemID
}

// HostPort returns host:port with the driver's default port filled in.
func (a Address) HostPort() string {
	p := a.Port
	if p == 0 {
		p = a.defaultPort()
	}
	return bracket(a.Host) + ":" + strconv.Itoa(p)
}

// defaultPort is the driver's port when the address gives none.
func (a Address) defaultPort() int {
	switch {
	case a.Driver == DriverIPMI:
		return 623
	case a.Scheme == "http":
		return 80
	}
	return 443
}

func bracket(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}
