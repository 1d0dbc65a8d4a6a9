// Package sample is the input of internal/gotest's golden test: a test of
// each outcome. It lives under testdata, so ./... never runs its failures.
package sample

import "testing"

func TestPass(t *testing.T) { t.Log("a passing test's log is not printed") }

func TestFail(t *testing.T) {
	t.Log("context before the failure")
	t.Errorf("Sum(1, 2) = %d, want %d\n  a second line, indented", 4, 3)
}

func TestSkip(t *testing.T) { t.Skip("missing: root; fix: run as root") }

func TestSubtests(t *testing.T) {
	t.Run("ok", func(t *testing.T) { t.Log("hidden") })
	t.Run("bad", func(t *testing.T) { t.Error("bad subtest") })
	t.Run("skipped", func(t *testing.T) { t.Skip("no widget here") })
	t.Log("the parent's own log")
}

func TestParallel(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "b" {
				t.Fatal("parallel b failed")
			}
		})
	}
}
