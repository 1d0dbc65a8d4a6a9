//go:build fakehw

package demo_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/ramdisk/disk"
	"github.com/better-compute/better-compute/sdk/iso"
)

var userDataToken = regexp.MustCompile(`--token, '([^']+)'`)

// TestDeployUserData: a profile's deploy.image names user data (a
// template in a named secret); the deployed machine's disk holds it
// rendered, in a cidata partition after the image, with the node's host
// name and a provisioned join token; neither the template nor the token
// is in a command, the workflow's history (decoded too) or a log.
func TestDeployUserData(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	logs := openLogs(t, filepath.Join(dir, "logs"), "demo", "control-plane", "temporal", "site", "rack", "bmc", "ramdisk")
	answers := &apiAnswers{}
	d := startLogged(t, dataDir, logs, answers, "canary-bmc-"+rand.Text())
	ctx := ctxFor(t, 5*time.Minute)
	canary := "canary-userdata-" + rand.Text()
	tmpl := "#cloud-config\n# " + canary + "\nhostname: {{hostname}}\nruncmd: [[bcd, node, --token, '{{joinToken}}']]\n"
	value, _ := json.Marshal(map[string]string{"userData": tmpl})
	secrets := tenantSecrets(t, d.CP.APIURL(), d.CP.RootTokenPath(), answers)
	if _, err := secrets.Put(ctx, connect.NewRequest(&v1.PutSecretRequest{Name: "ud", Value: value})); err != nil {
		t.Fatalf("secrets.put(ud) = %v", err)
	}
	raw := disk.GPTImage(16384, 2048, 16384-34) // an 8 MiB GPT image, as a cloud image
	img := serveRaw(t, raw)
	sum := sha256.Sum256(raw)
	imageProfile(ctx, t, d.API, "ud-os", &v1.RegisterImageRequest{Name: "gpt-os", Source: img,
		Digest: "sha256:" + hex.EncodeToString(sum[:]), Format: "raw", Compression: "none", Size: int64(len(raw))},
		map[string]any{"userDataRef": "secret://root/ud"})
	m := d.Rack.Machines()[0]
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: "ud-os", ProfileVersion: 1})); err != nil {
		t.Fatalf("metal.deploy ud-os = %v", err)
	}
	if err := d.Wait(ctx, m.Name, id, "deployed", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	userData := seedOnDisk(t, filepath.Join(dataDir, "rack", m.Name))
	tok := userDataToken.FindStringSubmatch(userData)
	if !strings.Contains(userData, "hostname: "+strings.ReplaceAll(id, "_", "-")+"\n") || !strings.Contains(userData, canary) ||
		tok == nil || !plainToken.MatchString(tok[1]) {
		t.Fatalf("user-data on %s's disk = %q, want the template rendered with its host name and a join token", m.Name, userData)
	}
	found := append(tokenSecret("the user data's join token", tok[1]), secret{"the user-data template", []byte(canary)})
	for _, c := range commands(t, d, id) {
		b, _ := protojson.Marshal(c)
		scanBytes(t, found, "command "+c.Id+" ("+c.Kind+")", b)
	}
	scanDecodedHistories(t, d, id, found)
	d.Stop()
	logs.close()
	scanForSecrets(t, found, logs.paths()...)
}

// serveRaw serves an image on loopback, as an image store would.
func serveRaw(t *testing.T, raw []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "os.raw", time.Unix(0, 0), bytes.NewReader(raw))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/os.raw"
}

// seedOnDisk reads user-data from the cidata partition of the machine's
// disk that has one.
func seedOnDisk(t *testing.T, machineDir string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(machineDir, "*.img"))
	for _, p := range paths {
		seed, err := disk.ReadSeed(disk.Disk{Name: filepath.Base(p), Path: p})
		if err != nil {
			continue
		}
		b, err := iso.ReadFile(bytes.NewReader(seed), "user-data")
		if err != nil {
			t.Fatalf("the seed on %s: %v", p, err)
		}
		return string(b)
	}
	t.Fatalf("no disk of %s (%v) has a cidata partition", machineDir, paths)
	return ""
}
