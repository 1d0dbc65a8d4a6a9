// Package panics is the input of internal/gotest's golden test: a test that
// panics, which ends its test binary with no result line of its own.
package panics

import "testing"

func TestBeforePanic(t *testing.T) {}

func TestPanics(t *testing.T) {
	t.Log("about to panic")
	var m map[string]int
	m["x"] = 1
}
