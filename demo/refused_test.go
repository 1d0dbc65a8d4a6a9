//go:build fakehw

package demo_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
)

// TestDeployOfAnImageTheSiteCannotFetchIsRefused: a catalog image whose
// source answers 404 (a typo the control plane cannot see: it never
// fetches images) is pinned at the node's site before the node moves, so
// the deploy is refused and the node stays ready, saying why; `metal wait`
// says so and exits 1 at once instead of waiting out its timeout; the
// next deploy clears the old error and deploys.
func TestDeployOfAnImageTheSiteCannotFetchIsRefused(t *testing.T) {
	d := start(t, 1)
	ctx := ctxFor(t, 4*time.Minute)
	m := d.Rack.Machines()[0]
	id, err := d.EnrollReady(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	src := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(src.Close)
	image := imageProfile(ctx, t, d.API, "typo-os", &v1.RegisterImageRequest{Name: "typo-os", Source: src.URL + "/tpyo.img",
		Digest: "sha256:" + strings.Repeat("ab", 32), Format: "raw", Compression: "none", Size: 8 << 20}, nil)
	var dep v1.VerbResponse
	runCLI(t, d, 0, &dep, "metal", "deploy", id, "--profile", "typo-os", "--profile-version", "1", "-o", "json")
	began := time.Now()
	stderr := runCLI(t, d, 1, nil, "metal", "wait", id, "--state", "deployed", "--timeout", "2m")
	t.Logf("metal wait, %.1fs: %s", time.Since(began).Seconds(), stderr)
	want := "error: node " + id + ": deploy failed and left the node ready: cache.ensureImage: INVALID_INPUT: image " +
		image + "'s source " + src.URL + "/tpyo.img answered HTTP 404 Not Found"
	if !strings.Contains(stderr, want) {
		t.Errorf("metal wait said %q, want %q…", stderr, want)
	}
	n := node(t, d, id)
	if n.State != "ready" || !strings.HasPrefix(n.LastError, "deploy failed and left the node ready: ") {
		t.Errorf("node after the refused deploy = %s (%q), want ready with the refusal", n.State, n.LastError)
	}
	// The refused deploy sent only the image's fetch: no BMC or ramdisk command.
	var sent []string
	for _, c := range commands(t, d, id) {
		if c.RunId == dep.RunId {
			sent = append(sent, c.Kind+" "+c.Status)
		}
	}
	if want := []string{"cache.ensureImage failed"}; !slices.Equal(sent, want) {
		t.Errorf("the refused deploy's commands = %q, want %q", sent, want)
	}
	// A deploy of a good profile on the refused node clears its error as it starts.
	r, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: d.Profile, ProfileVersion: 1}))
	if err != nil {
		t.Fatalf("metal.deploy %s = %v", d.Profile, err)
	}
	if e := r.Msg.Node.LastError; e != "" {
		t.Errorf("metal.deploy answered the node with last error %q, want it cleared", e)
	}
	if err := d.Wait(ctx, m.Name, id, "deployed", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}
