// Package pki owns the trust of better-compute: the project's certificate
// authority in the data dir (ca.key, ca.crt), the leaf certificates it issues to
// agents for their own public keys, the SPIFFE identities those certificates carry
// (spiffe://<trust-domain>/<role>/<identity>), the mTLS configurations agents and
// servers speak, agents' private keys, and the join tokens (bcsite_…, bcdisc_…,
// bcprov_…, bcapi_…) that a JoinService exchanges for certificates.
//
// The CA never sees an agent's private key: an agent makes its key, keeps it in a
// 0600 file, and sends only the public key with its token. Tokens are stored by
// others only as hashes (HashToken) and print themselves redacted.
package pki

import (
	"net/url"
	"strings"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// Role is what an identity may do; it is the first path segment of the SPIFFE ID.
type Role string

const (
	RoleSite         Role = "site"          // a site agent (bcd site); identity site_…
	RoleRamdisk      Role = "ramdisk"       // a PXE-booted ramdisk (bcd ramdisk), admitted with a discovery token
	RoleNode         Role = "node"          // an installed machine's agent (bcd node); identity node_…
	RoleControlPlane Role = "control-plane" // a control-plane process (better-compute serve)
)

// Roles lists every known role.
func Roles() []Role { return []Role{RoleSite, RoleRamdisk, RoleNode, RoleControlPlane} }

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	switch r {
	case RoleSite, RoleRamdisk, RoleNode, RoleControlPlane:
		return true
	}
	return false
}

// MaxIdentityLen bounds an identity, the last segment of a SPIFFE ID.
const MaxIdentityLen = 128

// Option changes how a CA behaves.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock makes the CA read time from now: the validity of what it issues and
// the time at which it verifies peers. Tests use it to make expired certificates.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

func buildOptions(opts []Option) options {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// ValidateTrustDomain checks that td is a lowercase DNS-like name: dot-separated
// labels of letters, digits and inner hyphens, at most 63 bytes a label and 253 in
// all. It is the host part of every SPIFFE ID the CA issues.
func ValidateTrustDomain(td string) error {
	if td == "" {
		return errs.Invalid("trustDomain", "the trust domain is empty; pass a DNS-like name such as site.example.test")
	}
	if len(td) > 253 {
		return errs.Invalid("trustDomain", "trust domain %q is longer than 253 bytes", td)
	}
	for _, label := range strings.Split(td, ".") {
		if !validLabel(label) {
			return errs.Invalid("trustDomain",
				"trust domain %q is not a lowercase DNS-like name (labels of a-z, 0-9 and inner '-', separated by '.')", td)
		}
	}
	return nil
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateIdentity checks an identity: 1 to 128 bytes of lowercase letters,
// digits, '_', '-' and '.', starting with a letter or digit (site_01k5w…,
// node_01k5w…, cp-1.example.test).
func ValidateIdentity(id string) error {
	if id == "" || len(id) > MaxIdentityLen || !alnum(id[0]) {
		return errs.Invalid("identity",
			"identity %q must be 1 to %d bytes starting with a lowercase letter or digit", id, MaxIdentityLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !alnum(c) && c != '_' && c != '-' && c != '.' {
			return errs.Invalid("identity", "identity %q may hold only a-z, 0-9, '_', '-' and '.'", id)
		}
	}
	return nil
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// SPIFFEID returns spiffe://<trustDomain>/<role>/<identity>. It does not validate
// its arguments; Identify does on the way back.
func SPIFFEID(trustDomain string, role Role, identity string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/" + string(role) + "/" + identity}
}

// ParseID checks one SPIFFE ID against trustDomain and returns its role and
// identity. Anything but spiffe://<trustDomain>/<known role>/<valid identity>,
// with no user, port, query, fragment or escaping, is UNAUTHENTICATED.
func ParseID(u *url.URL, trustDomain string) (Role, string, error) {
	if u == nil {
		return "", "", unauthenticated("no SPIFFE ID")
	}
	if u.Scheme != "spiffe" || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || u.RawPath != "" || u.OmitHost {
		return "", "", unauthenticated("%q is not a plain spiffe:// URI", u.String())
	}
	if u.Host != trustDomain {
		return "", "", unauthenticated("SPIFFE ID %q is not in trust domain %q", u.String(), trustDomain)
	}
	rest, ok := strings.CutPrefix(u.Path, "/")
	role, identity, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return "", "", unauthenticated("SPIFFE ID %q is not spiffe://<trust-domain>/<role>/<identity>", u.String())
	}
	if !Role(role).Valid() {
		return "", "", unauthenticated("SPIFFE ID %q names unknown role %q", u.String(), role)
	}
	if err := ValidateIdentity(identity); err != nil {
		return "", "", unauthenticated("SPIFFE ID %q has a malformed identity", u.String())
	}
	return Role(role), identity, nil
}

func unauthenticated(format string, args ...any) error {
	return errs.New(errs.Unauthenticated, format, args...)
}
