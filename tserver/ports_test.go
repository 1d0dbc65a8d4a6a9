package tserver

import (
	"testing"

	"github.com/better-compute/better-compute/internal/freeport"
)

// The ports the server picks for itself are below the ephemeral range: one
// in it, free when picked, was taken by a connection's local port before
// the worker service bound it (CI), and the retry could not bind the fixed
// frontend port the failed start still held.
func TestPickedPortsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := freeport.Range()
	p, err := resolvePorts(withDefaults(Config{UIPort: -1}))
	if err != nil {
		t.Fatal(err)
	}
	for name, port := range map[string]int{"frontend": p.frontend, "history": p.history, "matching": p.matching, "worker": p.worker} {
		if port < lo || port >= hi {
			t.Errorf("%s port = %d, want one in [%d, %d), below the ephemeral range", name, port, lo, hi)
		}
	}
}
