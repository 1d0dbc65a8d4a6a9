package api

import (
	"regexp"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
)

var envNamePattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

// parseSecretRef parses secret://<tenant>/<name or id> strictly: exactly two
// segments, a tenant id and a secret's name or id, nothing else (no "..",
// no further "/"), so a reference can never be read as another tenant's.
func parseSecretRef(field, ref string) (tenant, key string, err error) {
	rest, ok := strings.CutPrefix(ref, "secret://")
	tenant, key, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || !tenantPattern.MatchString(tenant) ||
		!(namePattern.MatchString(key) || ids.Valid("sec", key)) {
		return "", "", errs.Invalid(field, "want secret://<tenant>/<name> (or the secret's id), got %s", quote(ref))
	}
	return tenant, key, nil
}

// checkEnvRef allows at enroll only env://BCD_SECRET_<NAME>: the API cannot
// know a site's own list of allowed names (bcd site --allow-env), so the rule
// it enforces is the prefix; any other variable of the site agent's
// environment (PATH, a token…) is never sent to a BMC through the API.
func checkEnvRef(field, ref string) error {
	name, _ := strings.CutPrefix(ref, "env://")
	if !envNamePattern.MatchString(name) || !strings.HasPrefix(name, kinds.EnvSecretPrefix) || name == kinds.EnvSecretPrefix {
		return errs.Invalid(field, "an env:// reference names a variable %s<NAME> of the site agent (upper case, digits, '_'), got %s",
			kinds.EnvSecretPrefix, quote(ref))
	}
	return nil
}
