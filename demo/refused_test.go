//go:build fakehw

package demo_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// source answers 404, or serves a file other than the one the catalog
// names (typos the control plane cannot see: it never fetches images), is
// pinned at the node's site before the node moves, so the deploy is refused
// at the first attempt (a retry would fetch the same answer) and the node
// stays ready, saying why; `metal wait` says so and exits 1 at once instead
// of waiting out its timeout; the next deploy clears the old error and
// deploys.
func TestDeployOfAnImageTheSiteCannotFetchIsRefused(t *testing.T) {
	d := start(t, 1)
	ctx := ctxFor(t, 4*time.Minute)
	m := d.Rack.Machines()[0]
	id, err := d.EnrollReady(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	served := []byte("not the image the catalog names")
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/other.img" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(served)
	}))
	t.Cleanup(src.Close)
	catalogDigest := strings.Repeat("ab", 32)
	servedSum := sha256.Sum256(served)
	for _, tt := range []struct {
		name, path string
		size       int64
		want       string // after "image <id>"
	}{
		{"source answers 404", "/tpyo.img", 8 << 20, "'s source " + src.URL + "/tpyo.img answered HTTP 404 Not Found"},
		{"source serves another file", "/other.img", int64(len(served)), " from " + src.URL + "/other.img has sha256 " +
			hex.EncodeToString(servedSum[:]) + ", the catalog says sha256 " + catalogDigest + ": fix the source or register the image again"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			profile := "typo-" + strings.ReplaceAll(tt.name, " ", "-")
			image := imageProfile(ctx, t, d.API, profile, &v1.RegisterImageRequest{Name: profile, Source: src.URL + tt.path,
				Digest: "sha256:" + catalogDigest, Format: "raw", Compression: "none", Size: tt.size}, nil)
			var dep v1.VerbResponse
			runCLI(t, d, 0, &dep, "metal", "deploy", id, "--profile", profile, "--profile-version", "1", "-o", "json")
			began := time.Now()
			stderr := runCLI(t, d, 1, nil, "metal", "wait", id, "--state", "deployed", "--timeout", "2m")
			t.Logf("metal wait, %.1fs: %s", time.Since(began).Seconds(), stderr)
			want := "error: node " + id + ": deploy failed and left the node ready: cache.ensureImage: INVALID_INPUT: image " + image + tt.want
			if !strings.Contains(stderr, want) {
				t.Errorf("metal wait said %q, want %q…", stderr, want)
			}
			n := node(t, d, id)
			if n.State != "ready" || !strings.HasPrefix(n.LastError, "deploy failed and left the node ready: ") {
				t.Errorf("node after the refused deploy = %s (%q), want ready with the refusal", n.State, n.LastError)
			}
			// The refused deploy sent only the image's fetch, once: no BMC or
			// ramdisk command, no retry.
			var sent []string
			for _, c := range commands(t, d, id) {
				if c.RunId == dep.RunId {
					sent = append(sent, fmt.Sprintf("%s %s (attempt %d)", c.Kind, c.Status, c.Attempt))
				}
			}
			if want := []string{"cache.ensureImage failed (attempt 1)"}; !slices.Equal(sent, want) {
				t.Errorf("the refused deploy's commands = %q, want %q", sent, want)
			}
		})
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
