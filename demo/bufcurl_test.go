//go:build fakehw

package demo_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
)

// bufCurl runs `buf curl` (pinned, as the Taskfile's generate pins buf)
// with args and returns what it printed.
func bufCurl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "github.com/bufbuild/buf/cmd/buf@v1.75.0", "curl", "--http2-prior-knowledge"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("buf curl %s = %v:\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestBufCurlDiscoversTheAPI: a real gRPC client that knows nothing of our
// API (buf curl, by server reflection) lists every service of a running
// serve, gets SERVING from its health service, and calls a method with the
// root token.
func TestBufCurlDiscoversTheAPI(t *testing.T) {
	d := start(t, 0)
	url := d.CP.APIURL()
	listed := bufCurl(t, "--list-services", url)
	for _, f := range []protoreflect.FileDescriptor{v1.File_bettercompute_v1_resources_proto,
		v1.File_bettercompute_v1_metal_proto, v1.File_bettercompute_v1_secrets_proto} {
		for i := 0; i < f.Services().Len(); i++ {
			if svc := string(f.Services().Get(i).FullName()); !strings.Contains(listed, svc) {
				t.Errorf("buf curl --list-services = %q, want %s listed", listed, svc)
			}
		}
	}
	if out := bufCurl(t, "--protocol", "grpc", "-d", "{}", url+"/grpc.health.v1.Health/Check"); !strings.Contains(out, "SERVING") {
		t.Errorf("health check = %q, want SERVING", out)
	}
	tok, err := os.ReadFile(d.CP.RootTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	out := bufCurl(t, "--protocol", "grpc", "-H", "Authorization: Bearer "+strings.TrimSpace(string(tok)), "-d", `{"tenantId":"root"}`,
		url+"/bettercompute.v1.SitesService/List")
	if !strings.Contains(out, d.SiteID) {
		t.Errorf("SitesService/List with the root token = %q, want the demo's site %s", out, d.SiteID)
	}
}
