//go:build fakehw

package demo_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/pki"
)

// testWriter sends the demo's progress lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b[:len(b)-1])); return len(b), nil }

func start(t *testing.T, machines int) *demo.Demo {
	t.Helper()
	return startWith(t, func(c *demo.Config) { c.Machines = machines })
}

// logTail keeps the last logTailBytes of what is written to it. It lets
// the buffer grow to twice that before dropping the oldest half, so a log
// line costs a copy of itself, not of the whole tail.
type logTail struct {
	mu sync.Mutex
	b  []byte
}

const logTailBytes = 256 << 10

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 2*logTailBytes {
		l.b = append(l.b[:0], l.b[len(l.b)-logTailBytes:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b[max(0, len(l.b)-logTailBytes):])
}

// startWith starts a demo on loopback in a temp dir, its progress lines
// logged to the test, with edit's changes to the config (machines, BMC
// password, tracer…), stopped when the test ends. The log of its control
// plane, site agent and rack is kept and printed (its last 256 KiB) when
// the test failed, so a failure says which side lost the machine.
func startWith(t *testing.T, edit func(*demo.Config)) *demo.Demo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := &logTail{}
	t.Cleanup(func() { // after d.Stop (cleanups run last first): the whole log
		if t.Failed() {
			t.Logf("the demo's log (its last %d KiB):\n%s", logTailBytes>>10, logs)
		}
	})
	cfg := demo.Config{DataDir: t.TempDir(), Out: testWriter{t},
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Listen: "127.0.0.1:0", TemporalListen: "127.0.0.1:0",
		UIListen: "off", AgentsListen: "127.0.0.1:0", ImageSize: 8 << 20}
	edit(&cfg)
	d, err := demo.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("demo.Start = %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func node(t *testing.T, d *demo.Demo, id string) *v1.Node {
	t.Helper()
	r, err := d.API.Metal.Get(context.Background(), connect.NewRequest(&v1.GetNodeRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg.Node
}

// imageProfile is api.ImageProfile, failing t.
func imageProfile(ctx context.Context, t testing.TB, api *demo.Client, id string, img *v1.RegisterImageRequest, with map[string]any) string {
	t.Helper()
	image, err := api.ImageProfile(ctx, id, img, with)
	if err != nil {
		t.Fatal(err)
	}
	return image
}

func commands(t *testing.T, d *demo.Demo, id string) []*v1.Command {
	t.Helper()
	r, err := d.API.Commands.List(context.Background(), connect.NewRequest(&v1.ListCommandsRequest{NodeId: id}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg.Items
}

func code(err error) string {
	var ce *connect.Error
	if !asConnect(err, &ce) {
		return "no error"
	}
	for _, det := range ce.Details() {
		v, e := det.Value()
		if e == nil {
			if d, ok := v.(*v1.ErrorDetail); ok {
				return d.Kind
			}
		}
	}
	return ce.Code().String()
}

// rejoin tries to join as a ramdisk with token through the agents' listener.
func rejoin(d *demo.Demo, token string) error {
	hc, err := agentsHTTP(d)
	if err != nil {
		return err
	}
	c := bettercomputev1connect.NewJoinServiceClient(hc, d.CP.AgentsURL(), connect.WithProtoJSON())
	_, pemKey, _ := pki.NewEd25519Key()
	signer, _ := pki.ParseKey(pemKey)
	pub, _ := pki.MarshalPublicKey(signer.Public())
	_, err = c.Join(context.Background(), connect.NewRequest(&v1.JoinRequest{Token: token, Role: "ramdisk", PublicKeyPem: pub}))
	return err
}

func agentsHTTP(d *demo.Demo) (*http.Client, error) {
	b, err := os.ReadFile(d.CP.CAFile())
	if err != nil {
		return nil, err
	}
	pool, err := pki.PoolFromPEM(b)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}}}, nil
}
