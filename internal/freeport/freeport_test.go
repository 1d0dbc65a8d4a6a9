package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports picked are below the ephemeral range, where no outgoing
// connection takes one, and bindable.
func TestPickBelowTheEphemeralRange(t *testing.T) {
	lo, hi := Range()
	for range 20 {
		port, err := Pick("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if port < lo || port >= hi {
			t.Fatalf("Pick = %d, want a port in [%d, %d), below the ephemeral range", port, lo, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d picked is not free: %v", port, err)
		}
		l.Close()
	}
}
