// Package testtemporal owns the Temporal server that tests share: one
// in-memory embedded server per test binary (no UI), a fresh namespace per
// test with the custom search attributes registered, and clients closed at
// cleanup. Importing it links the Temporal server into the test binary, which
// is slow the first time (minutes) and then takes tens of seconds; tests that
// need no server semantics should use the SDK's testsuite instead.
package testtemporal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/better-compute/better-compute/tserver"
)

// shared is the one server of the test binary. It is never stopped: it lives
// in this process and goes with it.
type shared struct {
	once sync.Once
	srv  *tserver.Server
	err  error
}

// server is the per-binary state Server needs; sync.Once is the point.
var server shared

// Server returns the host:port of the test binary's embedded server,
// starting it on first use. Its default namespace is "default".
func Server(t testing.TB) (hostPort string) {
	t.Helper()
	server.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		server.srv, server.err = tserver.Start(ctx, tserver.Config{
			UIPort: -1,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		})
	})
	if server.err != nil {
		t.Fatalf("testtemporal: starting the embedded Temporal server: %v", server.err)
	}
	return server.srv.FrontendAddress()
}

// Namespace returns a namespace made for this test, with the custom search
// attributes registered.
func Namespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns := "test-" + hex.EncodeToString(b)
	c := Client(t, "default", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tserver.EnsureNamespace(ctx, c, ns); err != nil {
		t.Fatalf("testtemporal: EnsureNamespace(%s) = %v", ns, err)
	}
	if err := tserver.RegisterSearchAttributes(ctx, c, ns); err != nil {
		t.Fatalf("testtemporal: RegisterSearchAttributes(%s) = %v", ns, err)
	}
	return ns
}

// Client returns a client of namespace ns on the shared server, with data
// converter dc (nil: the SDK default), closed when the test ends.
func Client(t testing.TB, ns string, dc converter.DataConverter) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:      Server(t),
		Namespace:     ns,
		DataConverter: dc,
		Logger:        sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	if err != nil {
		t.Fatalf("testtemporal: client.Dial(%s) = %v", ns, err)
	}
	t.Cleanup(c.Close)
	return c
}
