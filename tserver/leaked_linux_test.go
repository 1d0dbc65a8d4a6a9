package tserver

import (
	"net"
	"os"
	"testing"
)

// TestReleaseLeaked: a listener of this process that nothing will close
// (as a failed Temporal build leaves one) is released, so its port binds
// again, and the leftover's own close, if it comes later, closes nothing
// opened since; a listener that was there before (in keep) is left alone,
// and so is a port this process does not listen on.
func TestReleaseLeaked(t *testing.T) {
	kept := listen(t)
	keptPort := kept.Addr().(*net.TCPAddr).Port
	before, err := listening([]int{keptPort})
	if err != nil || len(before) != 1 {
		t.Fatalf("listening(%d) = %v, %v; want the one listener", keptPort, before, err)
	}
	leftover := listen(t)
	port := leftover.Addr().(*net.TCPAddr).Port
	n, err := releaseLeaked([]int{port, keptPort, port + 1}, before)
	if err != nil || n != 1 {
		t.Fatalf("releaseLeaked = %d, %v; want 1 listener released", n, err)
	}
	again, err := net.Listen("tcp", leftover.Addr().String())
	if err != nil {
		t.Fatalf("port %d after releaseLeaked: %v, want it free", port, err)
	}
	defer again.Close()
	if c, err := net.Dial("tcp", kept.Addr().String()); err != nil {
		t.Errorf("the listener there before (kept): %v, want it still listening", err)
	} else {
		c.Close()
	}

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
}

// TestBindFailure reads the port a failed Temporal build could not bind
// from its panic, and nothing from any other.
func TestBindFailure(t *testing.T) {
	for msg, want := range map[string]int{
		"temporal server: Failed to start gRPC listener error=listen tcp 127.0.0.1:33077: bind: address already in use service=worker address=127.0.0.1:33077": 33077,
		"listen tcp [::1]:7233: bind: address already in use":            7233,
		"temporal server: sql schema version compatibility check failed": 0,
		"listen tcp 127.0.0.1:7233: bind: permission denied":             0,
	} {
		if got := bindFailure(msg); got != want {
			t.Errorf("bindFailure(%q) = %d, want %d", msg, got, want)
		}
	}
}
