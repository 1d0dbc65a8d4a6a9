package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// TestEnrollBMCTLSFlags: --bmc-ca-file sends the file's PEM, --bmc-tls-pin
// and --bmc-insecure their values; none sends no tls at all.
func TestEnrollBMCTLSFlags(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	const pemText = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	ca := writeFile(t, dir, "bmc-ca.pem", pemText)
	enroll := []string{"--tenant", "root", "metal", "enroll", "--site", "site_1", "--pool", "pool_1", "--bmc-address", "10.20.0.14",
		"--bmc-driver", "redfish", "--bmc-credentials", "secret://root/bmc-r12-14"}
	tests := []struct {
		flags []string
		want  any // the request's bmc.tls
	}{
		{nil, nil},
		{[]string{"--bmc-ca-file", ca}, map[string]any{"caPem": pemText}},
		{[]string{"--bmc-tls-pin", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}, map[string]any{"spkiPin": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}},
		{[]string{"--bmc-insecure"}, map[string]any{"insecure": true}},
	}
	for _, tt := range tests {
		rec, _, url := newMetalAPI(t)
		args := append(append([]string(nil), enroll...), tt.flags...)
		if _, stderr, code := run(url, args...); code != 0 {
			t.Fatalf("Main(%q) = %d, want 0; stderr %q", args, code, stderr)
		}
		calls := rec.all()
		bmc, _ := calls[0].body["bmc"].(map[string]any)
		if diff := cmp.Diff(tt.want, bmc["tls"]); diff != "" {
			t.Errorf("Main(%q) bmc.tls (-want +got):\n%s", args, diff)
		}
	}
	_, stderr, code := run("http://127.0.0.1:1", append(enroll, "--bmc-ca-file", filepath.Join(dir, "missing.pem"))...)
	if code == 0 || !strings.Contains(stderr, "INVALID_INPUT") || !strings.Contains(stderr, "bmc-ca-file") {
		t.Errorf("enroll --bmc-ca-file missing = %d %q, want INVALID_INPUT naming bmc-ca-file", code, stderr)
	}
}

// tlsNodeFake answers metal get with a node enrolled with --bmc-insecure.
type tlsNodeFake struct {
	bettercomputev1connect.UnimplementedMetalServiceHandler
}

func (tlsNodeFake) Get(_ context.Context, r *connect.Request[v1.GetNodeRequest]) (*connect.Response[v1.GetNodeResponse], error) {
	n := node(r.Msg.GetId(), "ready")
	n.BmcTls = &v1.BmcTls{Insecure: true}
	return ok(&v1.GetNodeResponse{Node: n})
}

// TestGetShowsBMCInsecure: metal get shows a node's BMC TLS opt-out.
func TestGetShowsBMCInsecure(t *testing.T) {
	isolate(t)
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewMetalServiceHandler(tlsNodeFake{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	stdout, stderr, code := run(srv.URL, "--tenant", "root", "metal", "get", "node_1")
	if code != 0 {
		t.Fatalf("metal get = %d, stderr %q", code, stderr)
	}
	t.Logf("metal get:\n%s", stdout)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("metal get = %q, want a header and a row", stdout)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	if head[len(head)-2] != "INSECURE" || row[len(row)-1] != "true" {
		t.Errorf("metal get = %q, want an INSECURE column holding true", stdout)
	}
}
