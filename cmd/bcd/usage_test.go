package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	bccli "github.com/better-compute/better-compute/cli"
)

// TestUsageErrors: bcd's usage errors are INVALID_INPUT with exit code 2,
// as better-compute's are. Before, each printed urfave/cli's bare message
// ("Required flag \"ca-file\" not set", "No help topic for 'frob'") and
// exited 1, like a failure of the agent itself.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bcd", "node"}, `error: INVALID_INPUT: Required flag "ca-file" not set`},
		{[]string{"bcd", "site", "--bogus"}, "error: INVALID_INPUT: flag provided but not defined: -bogus (see bcd site --help)"},
		{[]string{"bcd", "frob"}, `error: INVALID_INPUT: unknown command "frob"`},
	} {
		var stderr bytes.Buffer
		code := bccli.Run(context.Background(), app(), tc.args, &stderr)
		if code != 2 || !strings.HasPrefix(stderr.String(), tc.want) {
			t.Errorf("%v = %d %q, want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
