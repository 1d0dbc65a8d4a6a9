package bodytimeout

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSlowBodyIsCut: a body that stops arriving ends the request after the
// timeout (the handler's read fails), and a body sent whole is served and
// leaves the handler free to run past the timeout.
func TestSlowBodyIsCut(t *testing.T) {
	const d = 200 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		select { // a long poll outlives the body's deadline
		case <-time.After(2 * d):
			fmt.Fprint(w, "ok")
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		}
	})
	srv := httptest.NewServer(Handler(h, d))
	t.Cleanup(srv.Close)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npart")
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		resp.Body.Close()
	}
	if took := time.Since(start); took > 10*d {
		t.Errorf("a stalled body held the request %v, want about %v", took, d)
	}
	if err == nil && resp.StatusCode == http.StatusOK {
		t.Errorf("a stalled body = 200, want the request cut")
	}

	resp, err = http.Post(srv.URL, "text/plain", strings.NewReader("whole"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Errorf("a whole body with a long handler = %d %q, want 200 ok", resp.StatusCode, b)
	}
}
