//go:build fakehw

package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
	"github.com/better-compute/better-compute/ramdisk/disk"
	"github.com/better-compute/better-compute/sdk/iso"
)

// TestDeployImageWritesUserData: deploy.image with a userDataRef fetches
// the seed from the site's boot listener and writes it to a cidata
// partition after the image (read back from the fake disk, user-data
// intact); a seed that does not match its digest fails the command and
// nothing is written after the image.
func TestDeployImageWritesUserData(t *testing.T) {
	t.Parallel()
	raw := disk.GPTImage(8192, 2048, 6143)
	const userData = "#cloud-config\nhostname: n-1\nruncmd: [[bcd, node, --token, bct_p_secret]]\n"
	var seed bytes.Buffer
	if err := iso.Write(&seed, "cidata", map[string][]byte{"user-data": []byte(userData), "meta-data": []byte("instance-id: n-1\n")}); err != nil {
		t.Fatal(err)
	}
	const seedPath = "/artifacts/a7q2x/cidata.iso"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cache/img":
			w.Write(raw)
		case seedPath:
			w.Write(seed.Bytes())
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(seed.Bytes())
	for _, tc := range []struct {
		name, sha, wantErr string
	}{
		{"good", hex.EncodeToString(sum[:]), ""},
		{"wrong digest", strings.Repeat("0", 64), "DRIVER_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeDisks(t, disk.Disk{Serial: "OS-1", SizeBytes: 64 << 20})
			relay := agenttest.NewRelay(t)
			a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}}, srv.URL)
			res := send(t, relay, a.node, kinds.DeployImage, kinds.DeployImageInput{Path: "/cache/img", Digest: digest(raw),
				Format: "raw", UserDataRef: seedPath, UserDataSHA256: tc.sha})
			d := disk.Disk{Name: "serial-OS-1", Path: filepath.Join(dir, "serial-OS-1.img")}
			got, err := disk.ReadSeed(d)
			if tc.wantErr != "" {
				if res.OK || res.ErrorKind != tc.wantErr || err == nil {
					t.Fatalf("deploy.image with a bad seed digest = ok %v %s %q, seed read back err %v; want %s and no seed", res.OK, res.ErrorKind, res.Error, err, tc.wantErr)
				}
				return
			}
			if !res.OK {
				t.Fatalf("deploy.image = %s %s", res.ErrorKind, res.Error)
			}
			if err != nil {
				t.Fatalf("ReadSeed after deploy.image = %v, want the cidata partition", err)
			}
			if ud, err := iso.ReadFile(bytes.NewReader(got), "user-data"); string(ud) != userData {
				t.Errorf("user-data on the disk = %q, %v, want %q", ud, err, userData)
			}
		})
	}
}
