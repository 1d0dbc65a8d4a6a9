// Package testenv owns how a test says that this machine lacks something it
// needs (root, a tool, shared data): on a developer's machine the test is
// skipped with the reason and the fix; in CI (the environment variable CI is
// set, as .ci/run does), where everything is provided, the same test fails
// with them, so a missing tool or data set can never pass as a skip.
package testenv

import (
	"os"
	"testing"
)

// Missing ends t because the machine lacks need: it skips with need and fix,
// or fails with them when CI is set. Call it only when need is missing.
func Missing(t testing.TB, need, fix string) {
	t.Helper()
	if InCI() {
		t.Fatalf("missing in CI: %s; fix: %s", need, fix)
		return // Fatalf does not return in a test; a fake TB's may
	}
	t.Skipf("missing: %s; fix: %s (in CI, with CI set, this fails)", need, fix)
}

// InCI reports whether the tests run in CI: the environment variable CI is
// set to anything but "", "0" or "false".
func InCI() bool {
	switch os.Getenv("CI") {
	case "", "0", "false":
		return false
	}
	return true
}
