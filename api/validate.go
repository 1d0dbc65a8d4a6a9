package api

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
)

var (
	namePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	tenantPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{1,62}$`)
	digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// checks gathers the first validation error in field order.
type checks struct{ err error }

func (c *checks) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = errs.Invalid(field, format, args...)
	}
}

func (c *checks) id(field, prefix, v string) {
	if !ids.Valid(prefix, v) {
		c.fail(field, "want an id like %s_01k5w…, got %s", prefix, quote(v))
	}
}

func (c *checks) name(field, v string) {
	if !namePattern.MatchString(v) {
		c.fail(field, "want 1-63 lowercase letters, digits or '-', got %s", quote(v))
	}
}

func (c *checks) oneOf(field, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		c.fail(field, "want one of %s, got %s", strings.Join(allowed, ", "), quote(v))
	}
}

// key checks an idempotency key: optional, short, printable.
func (c *checks) key(field, v string) {
	if len(v) > 128 {
		c.fail(field, "a key is at most 128 bytes, got %d", len(v))
		return
	}
	for _, r := range v {
		if r < 0x21 || r > 0x7e {
			c.fail(field, "a key is printable ASCII without spaces")
			return
		}
	}
}

// sourceURL checks an image source: http or https, a host, no credentials.
func (c *checks) sourceURL(field, v string) {
	u, err := url.Parse(v)
	switch {
	case err != nil:
		c.fail(field, "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		c.fail(field, "want an http or https URL, got scheme %s", quote(u.Scheme))
	case u.Host == "":
		c.fail(field, "the URL has no host")
	case u.User != nil:
		c.fail(field, "credentials do not belong in the URL; the site cache fetches it as is")
	}
}

// cidrs checks IPv4 CIDRs in canonical form.
func (c *checks) cidrs(field string, vs []string) {
	for i, v := range vs {
		p, err := netip.ParsePrefix(v)
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case err != nil:
			c.fail(f, "not a CIDR: %s", quote(v))
		case !p.Addr().Is4():
			c.fail(f, "want an IPv4 CIDR, got %s", quote(v))
		case p.Masked() != p:
			c.fail(f, "host bits set in %s; did you mean %s?", quote(v), p.Masked())
		}
	}
}

// credentialsRef checks a reference's form: secret:// strictly and of this
// tenant, env:// with the allowed prefix; the site resolves it later.
func (c *checks) credentialsRef(tenant, ref string) {
	var err error
	switch {
	case strings.HasPrefix(ref, "secret://"):
		var t string
		if t, _, err = parseSecretRef("bmc.credentialsRef", ref); err == nil && t != tenant {
			err = errs.Invalid("bmc.credentialsRef", "a secret:// reference names a secret of this tenant: secret://%s/<name>", tenant)
		}
	case strings.HasPrefix(ref, "env://"):
		err = checkEnvRef("bmc.credentialsRef", ref)
	}
	if err != nil && c.err == nil {
		c.err = err
	}
}
