package agent

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
)

// Boot is what the site put on the ramdisk's kernel command line.
type Boot struct {
	// Site is the site agent's relay, https://host:port (bc.site).
	Site string
	// NodeID is the machine's node id, node_… (bc.node).
	NodeID string
	// Token is the single-use discovery token, bcdisc_… (bc.token). It is a
	// secret: Boot prints it redacted.
	Token pki.Token
	// CAFingerprint is the SHA-256 of the project CA's certificate (DER),
	// the only trust anchor the ramdisk starts with (bc.ca).
	CAFingerprint []byte
	// BootURL is the site's plain HTTP boot listener, http://host:port
	// (bc.boot, optional): images for deploy.image are fetched from it.
	BootURL string
}

// String prints b with the token redacted.
func (b Boot) String() string {
	return fmt.Sprintf("{Site:%s NodeID:%s Token:%s CA:%x BootURL:%s}", b.Site, b.NodeID, b.Token, b.CAFingerprint, b.BootURL)
}

// LogValue keeps slog from printing the token.
func (b Boot) LogValue() slog.Value {
	return slog.GroupValue(slog.String("site", b.Site), slog.String("node", b.NodeID),
		slog.String("ca", hex.EncodeToString(b.CAFingerprint)), slog.String("boot", b.BootURL))
}

// ParseCmdline reads the bc.* parameters from a kernel command line
// (/proc/cmdline): bc.site, bc.node, bc.token and bc.ca are required, bc.boot
// is optional; other parameters are ignored. Values may be double-quoted, as
// the kernel allows. A missing, repeated or malformed bc.* parameter is
// INVALID_INPUT naming it; the token never appears in an error.
func ParseCmdline(s string) (Boot, error) {
	params := map[string]string{}
	for _, w := range splitCmdline(s) {
		k, v, _ := strings.Cut(w, "=")
		if !strings.HasPrefix(k, "bc.") {
			continue
		}
		if _, dup := params[k]; dup {
			return Boot{}, errs.Invalid(k, "%s appears twice on the kernel command line; the site writes it once", k)
		}
		params[k] = v
	}
	for _, k := range []string{"bc.site", "bc.node", "bc.token", "bc.ca"} {
		if params[k] == "" {
			return Boot{}, errs.Invalid(k, "%s is missing from the kernel command line; boot the ramdisk from the site agent's iPXE script", k)
		}
	}
	var b Boot
	var err error
	if b.Site, err = parseURL("bc.site", params["bc.site"], "https"); err != nil {
		return Boot{}, err
	}
	if b.NodeID = params["bc.node"]; !ids.Valid(ids.Node, b.NodeID) {
		return Boot{}, errs.Invalid("bc.node", "%q is not a node id (node_ and 26 base32 characters)", b.NodeID)
	}
	tok, kind, err := pki.ParseToken(params["bc.token"])
	if err != nil || kind != pki.TokenDiscovery {
		return Boot{}, errs.Invalid("bc.token", "bc.token is not a discovery token (bcdisc_…)")
	}
	b.Token = tok
	if b.CAFingerprint, err = hex.DecodeString(params["bc.ca"]); err != nil || len(b.CAFingerprint) != 32 {
		return Boot{}, errs.Invalid("bc.ca", "%q is not the 64 hex digit SHA-256 of the CA certificate", params["bc.ca"])
	}
	if v, ok := params["bc.boot"]; ok {
		if b.BootURL, err = parseURL("bc.boot", v, "http", "https"); err != nil {
			return Boot{}, err
		}
	}
	return b, nil
}

// parseURL checks that v is scheme://host[:port] with one of schemes and
// returns it without a trailing slash.
func parseURL(field, v string, schemes ...string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return "", errs.Invalid(field, "%q is not a URL of the form %s://host:port", v, schemes[0])
	}
	ok := false
	for _, s := range schemes {
		ok = ok || u.Scheme == s
	}
	switch {
	case !ok:
		return "", errs.Invalid(field, "%q must use %s", v, strings.Join(schemes, " or "))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return "", errs.Invalid(field, "%q must be only %s://host:port, without user, path or query", v, u.Scheme)
	}
	return u.Scheme + "://" + u.Host, nil
}

// splitCmdline splits a kernel command line into parameters the way the
// kernel does: on spaces, except inside double quotes, which are removed.
func splitCmdline(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case !quoted && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
