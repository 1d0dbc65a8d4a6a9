package frontends_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/better-compute/better-compute/internal/frontends"
)

// serveHealth serves gRPC's health service on a loopback port (a stand-in
// for a frontend) and returns its address and the server.
func serveHealth(t *testing.T) (string, *grpc.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String(), s
}

// dial connects as the Temporal SDK does: the target and options of a Set,
// balanced round robin.
func dial(t *testing.T, s *frontends.Set) healthpb.HealthClient {
	t.Helper()
	opts := append(s.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin":{}}]}`))
	cc, err := grpc.NewClient(s.Target(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// checks makes n calls, each failing fast, and returns the failures.
func checks(hc healthpb.HealthClient, n int) []error {
	var errs []error
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	return errs
}

// TestSetSurvivesAFrontend: calls balanced over two frontends all succeed
// after the first dies (once the connection saw it go), and after Update
// names a third instead of the dead one, they succeed when the second
// dies too.
func TestSetSurvivesAFrontend(t *testing.T) {
	a, sa := serveHealth(t)
	b, sb := serveHealth(t)
	set := frontends.New([]string{a, b})
	hc := dial(t, set)
	if errs := checks(hc, 10); len(errs) > 0 {
		t.Fatalf("calls with both frontends up failed: %v", errs)
	}
	sa.Stop()
	time.Sleep(200 * time.Millisecond) // the connection sees the close
	if errs := checks(hc, 20); len(errs) > 0 {
		t.Errorf("calls after %s died = %d failed (%v), want none: %s serves them", a, len(errs), errs[0], b)
	}
	c, _ := serveHealth(t)
	set.Update([]string{b, c})
	time.Sleep(200 * time.Millisecond)
	sb.Stop()
	time.Sleep(200 * time.Millisecond)
	if errs := checks(hc, 20); len(errs) > 0 {
		t.Errorf("calls after Update(%s, %s) and %s died = %d failed (%v), want none", b, c, b, len(errs), errs[0])
	}
}

func TestSplit(t *testing.T) {
	for in, want := range map[string]string{"a:1": "[a:1]", " a:1 , b:2 ,": "[a:1 b:2]", "": "[]"} {
		if got := fmt.Sprint(frontends.Split(in)); got != want {
			t.Errorf("Split(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestTargetOfOneIsTheAddress(t *testing.T) {
	if target, opts := frontends.Target([]string{"a:1"}); target != "a:1" || opts != nil {
		t.Errorf("Target([a:1]) = %q, %d options; want a:1 and none", target, len(opts))
	}
}
