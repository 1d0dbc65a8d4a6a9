//go:build fakehw

package demo_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/errs"
)

// crashProfile is the deploy profile the crash tests register.
const crashProfile = "crash-os"

// crashHardware is the config.yaml of a crash test's control plane: the
// hardware profile of the emulated rack.
const crashHardware = `hardwareProfiles:
  emulated-redfish:
    description: emulated machines with Redfish BMCs
    drivers: {power: redfish, management: redfish, boot: ipxe, deploy: image-stream}
`

const crashBMCPassword = "crash-bmc-password"

// imageSource is the operator's image store: a dense zstd raw image (every
// block data, so writing it takes the disk's time) served from a file, with
// the GETs counted.
type imageSource struct {
	URL    string
	Digest string // sha256 of the compressed file
	Size   int64  // bytes of the compressed file
	Raw    int64  // bytes of the image
	RawSum [sha256.Size]byte
	gets   atomic.Int64
}

// newImageSource writes a raw image of raw bytes (a multiple of 1 MiB),
// compressed, into dir and serves it until the test ends.
func newImageSource(t *testing.T, dir string, raw int64) *imageSource {
	t.Helper()
	path := filepath.Join(dir, "crash-os.raw.zst")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zsum, rsum := sha256.New(), sha256.New()
	enc, err := zstd.NewWriter(io.MultiWriter(f, zsum), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	block := make([]byte, 1<<20)
	for off := int64(0); off < raw; off += int64(len(block)) {
		for i := 0; i < len(block); i += 8 { // 4 bits of entropy a byte: compressible, never zero
			v := rng.Uint64()&0x0f0f0f0f0f0f0f0f | 0x1010101010101010
			for j := range 8 {
				block[i+j] = byte(v >> (8 * j))
			}
		}
		if off == 0 {
			copy(block, "BCCRASH-OS-IMAGE\n")
		}
		if _, err := enc.Write(block); err != nil {
			t.Fatal(err)
		}
		rsum.Write(block)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	img := &imageSource{Digest: "sha256:" + hex.EncodeToString(zsum.Sum(nil)), Size: st.Size(), Raw: raw}
	copy(img.RawSum[:], rsum.Sum(nil))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		img.gets.Add(1)
		http.ServeFile(w, r, path)
	}))
	t.Cleanup(srv.Close)
	img.URL = srv.URL + "/images/crash-os.raw.zst"
	return img
}

// siteFixture is what registerSite made.
type siteFixture struct {
	SiteID, PoolID, ImageID string
	TokenFile               string // a single-use site token for the agent's first start
}

// registerSite does what an operator does before enrolling: a site, a site
// token (written to dir/site-token), a pool, the image and a deploy profile.
func registerSite(ctx context.Context, t testing.TB, api *demo.Client, dir string, img *imageSource) siteFixture {
	t.Helper()
	var fx siteFixture
	s, err := api.Sites.Create(ctx, connect.NewRequest(&v1.CreateSiteRequest{Kind: "shared", Region: "crash-1", Key: "crash-1", LoopbackLab: true}))
	if err != nil {
		t.Fatalf("sites.create = %v", err)
	}
	fx.SiteID = s.Msg.Site.Id
	tok, err := api.SiteTokens.Create(ctx, connect.NewRequest(&v1.CreateSiteTokenRequest{SiteId: fx.SiteID, TtlSeconds: 3600, Key: "crash-1-agent"}))
	if err != nil {
		t.Fatalf("site-tokens.create = %v", err)
	}
	fx.TokenFile = filepath.Join(dir, "site-token")
	if err := os.WriteFile(fx.TokenFile, []byte(tok.Msg.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := api.Pools.Create(ctx, connect.NewRequest(&v1.CreatePoolRequest{SiteId: fx.SiteID, Class: "metal-host",
		Policy: &v1.PoolPolicy{HardwareProfile: "emulated-redfish"}}))
	if err != nil {
		t.Fatalf("pools.create = %v", err)
	}
	fx.PoolID = p.Msg.Pool.Id
	fx.ImageID = imageProfile(ctx, t, api, crashProfile, &v1.RegisterImageRequest{Name: "crash-os", Source: img.URL,
		Digest: img.Digest, Format: "raw", Compression: "zstd", Size: img.Size}, nil)
	return fx
}

// siteAgentRig is what the site agent crash tests kill under: a control
// plane, a site served by a real `bcd site` process, and a one-machine
// rack booting from it, the machine enrolled and ready.
type siteAgentRig struct {
	cp      *controlplane.ControlPlane
	api     *demo.Client
	agent   *proc
	args    []string // bcd site's, to start it again after a kill (it joined: no token)
	rack    *emulate.Rack
	rackLog string
	m       emulate.MachineInfo
	node    string // the machine's node id
}

// startSiteAgentRig starts a siteAgentRig in dir, the site's deploy profile
// (crashProfile) writing img; extra are more of bcd site's flags.
func startSiteAgentRig(ctx context.Context, t *testing.T, dir string, img *imageSource, extra ...string) *siteAgentRig {
	t.Helper()
	r := &siteAgentRig{cp: startControlPlane(ctx, t, filepath.Join(dir, "cp"))}
	var err error
	if r.api, err = demo.NewClient(r.cp.APIURL(), r.cp.RootTokenPath()); err != nil {
		t.Fatal(err)
	}
	fx := registerSite(ctx, t, r.api, dir, img)
	ports := freePorts(t, 2)
	r.args = append([]string{"site", "--control-plane", r.cp.AgentsURL(), "--ca-file", r.cp.CAFile(),
		"--data-dir", filepath.Join(dir, "site-agent"), "--boot-listen", addr(ports[0]), "--relay-listen", addr(ports[1])}, extra...)
	r.agent = startProc(t, "bcd site", binary(t, "bcd"), filepath.Join(dir, "bcd-site.log"), append(r.args, "--token-file", fx.TokenFile)...)
	r.agent.waitLog("site agent started", 1, 30*time.Second)
	r.rack, r.rackLog = startRack(ctx, t, dir, "http://"+addr(ports[0]))
	r.m = r.rack.Machines()[0]
	r.node = enrollReady(ctx, t, r.api, fx, r.m)
	return r
}

// startRack starts a one-machine emulated rack in dir/rack booting from
// bootURL; its log (the ramdisk's included) goes to dir/rack.log.
func startRack(ctx context.Context, t *testing.T, dir, bootURL string) (*emulate.Rack, string) {
	t.Helper()
	logPath := filepath.Join(dir, "rack.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	rack, err := emulate.Start(ctx, emulate.Config{Machines: 1, Dir: filepath.Join(dir, "rack"), BootURL: bootURL,
		Username: "admin", Password: crashBMCPassword,
		Logger: slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		f.Close()
		t.Fatalf("emulate.Start = %v", err)
	}
	t.Cleanup(func() { rack.Close(); f.Close() })
	return rack, logPath
}

// enrollReady enrolls the machine by its BMC and waits for ready.
func enrollReady(ctx context.Context, t *testing.T, api *demo.Client, fx siteFixture, m emulate.MachineInfo) string {
	t.Helper()
	r, err := api.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: fx.SiteID, PoolId: fx.PoolID,
		Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver,
			Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: crashBMCPassword}}}))
	if err != nil {
		t.Fatalf("metal.enroll(%s) = %v", m.Name, err)
	}
	id := r.Msg.Node.Id
	if err := waitState(ctx, api, id, "ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitState polls the node until it is in want; failed or retired is an
// error, and so is the timeout. Errors of the API (a control plane that is
// restarting) are retried until the timeout.
func waitState(ctx context.Context, api *demo.Client, node, want string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last, lastErr := "", error(nil)
	for {
		r, err := api.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: node}))
		if err == nil {
			n := r.Msg.Node
			last = n.State
			switch {
			case n.State == want:
				return nil
			case n.State == "failed" || n.State == "retired":
				return errs.New(errs.InvalidState, "node %s is %s (from %s): %s; want %s", node, n.State, n.FailedFrom, n.LastError, want)
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return errs.New(errs.Unavailable, "node %s did not reach %s in %s; it is %q (last API error: %v)", node, want, timeout, last, lastErr)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// allocated is the bytes the filesystem holds for the fake disks in dir
// (delayed allocations included).
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.img"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("fake disks in %s: %v (%d found)", dir, err, len(paths))
	}
	var n int64
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		n += st.Blocks * 512
	}
	return n
}

// disksHolding returns the fake disks in dir whose first img.Raw bytes are
// the image, byte for byte.
func disksHolding(t *testing.T, dir string, img *imageSource) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.img"))
	var out []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, io.LimitReader(f, img.Raw))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(h.Sum(nil), img.RawSum[:]) {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

// commandsOf lists the node's commands; API errors are returned, not fatal,
// so callers can poll through a restart.
func commandsOf(ctx context.Context, api *demo.Client, node string) ([]*v1.Command, error) {
	r, err := api.Commands.List(ctx, connect.NewRequest(&v1.ListCommandsRequest{NodeId: node}))
	if err != nil {
		return nil, err
	}
	return r.Msg.Items, nil
}

// lastOfKind returns the last command of kind, or nil.
func lastOfKind(cmds []*v1.Command, kind string) *v1.Command {
	var c *v1.Command
	for _, x := range cmds {
		if x.Kind == kind {
			c = x
		}
	}
	return c
}

// checkDeployRun: the commands of the deploy run runID are the verb's, in
// order, once each, all succeeded, each in the attempt attempts names for its
// kind or else in its first: a site step that ran again shows its attempt.
func checkDeployRun(t *testing.T, cmds []*v1.Command, runID string, attempts map[string]int32) {
	t.Helper()
	var kinds []string
	for _, c := range cmds {
		if c.RunId != runID {
			continue
		}
		kinds = append(kinds, c.Kind)
		if want := max(attempts[c.Kind], 1); c.Status != "succeeded" || c.Attempt != want {
			t.Errorf("command %s %s = %s in attempt %d (%s), want succeeded in attempt %d", c.Step, c.Kind, c.Status, c.Attempt, c.Error, want)
		}
	}
	if diff := cmp.Diff(deployKinds, kinds); diff != "" {
		t.Errorf("commands of the deploy run %s (-want +got):\n%s", runID, diff)
	}
}
