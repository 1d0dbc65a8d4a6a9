package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// discoveryFake answers metal.discovered with two MACs (one the candidate
// of node_1) and metal.confirmMac as the API does for the candidate.
type discoveryFake struct {
	bettercomputev1connect.UnimplementedMetalServiceHandler
}

func (discoveryFake) Discovered(_ context.Context, r *connect.Request[v1.DiscoveredRequest]) (*connect.Response[v1.DiscoveredResponse], error) {
	if r.Msg.SiteId == "site_other" {
		return nil, apiError(connect.CodeNotFound, "NOT_FOUND", "", `site "site_other" not found`)
	}
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return ok(&v1.DiscoveredResponse{Items: []*v1.PxeDiscovery{
		{SiteId: r.Msg.SiteId, Mac: "52:54:00:00:00:aa", ClientUuid: "8f2c6a2e-0000-4000-8000-0000000000aa", Arch: "EFI x86-64",
			FirstSeen: timestamppb.New(t0), LastSeen: timestamppb.New(t0.Add(time.Minute)), Count: 4, CandidateFor: "node_1"},
		{SiteId: r.Msg.SiteId, Mac: "52:54:00:00:00:bb", FirstSeen: timestamppb.New(t0), LastSeen: timestamppb.New(t0), Count: 1},
	}})
}

func (discoveryFake) ConfirmMac(_ context.Context, r *connect.Request[v1.ConfirmMacRequest]) (*connect.Response[v1.ConfirmMacResponse], error) {
	if r.Msg.Mac != "52:54:00:00:00:aa" {
		return nil, apiError(connect.CodeAlreadyExists, "ALREADY_EXISTS", "", "MAC "+r.Msg.Mac+" belongs to node node_2 already")
	}
	return ok(&v1.ConfirmMacResponse{Node: &v1.Node{Id: r.Msg.NodeId, State: "inspecting", Macs: []string{r.Msg.Mac}}})
}

func newDiscoveryAPI(t *testing.T) (*recorder, string) {
	t.Helper()
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewMetalServiceHandler(discoveryFake{}))
	srv := httptest.NewServer(rec.wrap(mux))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// TestDiscoveryCommands: `metal discovered` and `metal confirm-mac` send
// what they are given, print a table, JSON or a query, and refuse missing
// arguments before any call.
func TestDiscoveryCommands(t *testing.T) {
	isolate(t)
	const svc = "/bettercompute.v1.MetalService/"
	tests := []struct {
		args      []string
		procedure string // "" for no call
		body      map[string]any
		stdout    string
		stderr    string // a prefix
		code      int
	}{
		{args: []string{"metal", "discovered", "--site", "site_1"}, procedure: svc + "Discovered",
			body: map[string]any{"tenantId": "root", "siteId": "site_1"},
			stdout: "MAC                CLIENT_UUID                           ARCH        FIRST_SEEN            LAST_SEEN             COUNT  CANDIDATE_FOR  NODE_ID\n" +
				"52:54:00:00:00:aa  8f2c6a2e-0000-4000-8000-0000000000aa  EFI x86-64  2030-01-02T03:04:05Z  2030-01-02T03:05:05Z  4      node_1         \n" +
				"52:54:00:00:00:bb                                                    2030-01-02T03:04:05Z  2030-01-02T03:04:05Z  1                     \n"},
		{args: []string{"metal", "discovered", "--site", "site_1", "--query", "items[?candidateFor=='node_1'].mac | [0]"},
			procedure: svc + "Discovered", body: map[string]any{"tenantId": "root", "siteId": "site_1"}, stdout: "52:54:00:00:00:aa\n"},
		{args: []string{"metal", "confirm-mac", "node_1", "--mac", "52:54:00:00:00:aa"}, procedure: svc + "ConfirmMac",
			body:   map[string]any{"tenantId": "root", "nodeId": "node_1", "mac": "52:54:00:00:00:aa"},
			stdout: "ID      STATE       MACS\nnode_1  inspecting  52:54:00:00:00:aa\n"},
		{args: []string{"metal", "confirm-mac", "node_1", "--mac", "52:54:00:00:00:aa", "-o", "json", "--query", "node.macs"},
			procedure: svc + "ConfirmMac", body: map[string]any{"tenantId": "root", "nodeId": "node_1", "mac": "52:54:00:00:00:aa"},
			stdout: "[\n  \"52:54:00:00:00:aa\"\n]\n"},
		{args: []string{"metal", "confirm-mac", "node_1", "--mac", "52:54:00:00:00:bb"}, procedure: svc + "ConfirmMac",
			body:   map[string]any{"tenantId": "root", "nodeId": "node_1", "mac": "52:54:00:00:00:bb"},
			stderr: "error: ALREADY_EXISTS: MAC 52:54:00:00:00:bb belongs to node node_2 already", code: 1},
		{args: []string{"metal", "discovered", "--site", "site_other"}, procedure: svc + "Discovered",
			body: map[string]any{"tenantId": "root", "siteId": "site_other"}, stderr: "error: NOT_FOUND: site", code: 1},
		{args: []string{"metal", "discovered"}, stderr: "error: INVALID_INPUT: --site is required", code: 2},
		{args: []string{"metal", "confirm-mac", "node_1"}, stderr: "error: INVALID_INPUT: --mac is required", code: 2},
		{args: []string{"metal", "confirm-mac", "--mac", "52:54:00:00:00:aa"}, stderr: "error: INVALID_INPUT: missing NODE", code: 2},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			rec, url := newDiscoveryAPI(t)
			args := append([]string{"--tenant", "root"}, tt.args...)
			stdout, stderr, code := run(url, args...)
			if code != tt.code || !strings.HasPrefix(stderr, tt.stderr) || (tt.stderr == "" && stderr != "") {
				t.Fatalf("Main(%q) = %d, stderr %q; want %d, %q", args, code, stderr, tt.code, tt.stderr)
			}
			if diff := cmp.Diff(tt.stdout, stdout); diff != "" {
				t.Errorf("Main(%q) stdout (-want +got):\n%s", args, diff)
			}
			calls := rec.all()
			switch {
			case tt.procedure == "" && len(calls) != 0:
				t.Errorf("Main(%q) made %d calls, want none", args, len(calls))
			case tt.procedure != "" && (len(calls) != 1 || calls[0].procedure != tt.procedure):
				t.Errorf("Main(%q) calls = %+v, want one to %s", args, calls, tt.procedure)
			case tt.procedure != "":
				if diff := cmp.Diff(tt.body, calls[0].body); diff != "" {
					t.Errorf("Main(%q) request body (-want +got):\n%s", args, diff)
				}
			}
		})
	}
}
