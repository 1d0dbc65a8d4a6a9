package tserver

import (
	"net"
	"os"
	"testing"
)

// TestReleaseLeaked: a listener of this process that nothing will close
// (as a failed Temporal build leaves one) is released, so its port binds
// again; the leftover's own close, if it comes later, closes nothing that
// was opened since; a port this process does not listen on is left alone.
func TestReleaseLeaked(t *testing.T) {
	leftover, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := leftover.Addr().(*net.TCPAddr).Port
	n, err := releaseLeaked(port)
	if err != nil || n != 1 {
		t.Fatalf("releaseLeaked(%d) = %d, %v; want 1 listener released", port, n, err)
	}
	again, err := net.Listen("tcp", leftover.Addr().String())
	if err != nil {
		t.Fatalf("port %d after releaseLeaked: %v, want it free", port, err)
	}
	defer again.Close()

	f, err := os.CreateTemp(t.TempDir(), "opened-since")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	leftover.Close() // the abandoned listener's close: its descriptor is no longer the socket
	if _, err := f.WriteString("still open"); err != nil {
		t.Errorf("a file opened after the release: %v after the leftover closed, want it untouched", err)
	}
	if c, err := net.Dial("tcp", again.Addr().String()); err != nil {
		t.Errorf("the port's new listener: dial %v after the leftover closed, want it listening", err)
	} else {
		c.Close()
	}

	if n, err := releaseLeaked(port + 1); err != nil || n != 0 {
		t.Errorf("releaseLeaked(a port this process does not listen on) = %d, %v; want 0, nil", n, err)
	}
}
