//go:build fakehw

package demo_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/pki"
)

// crashImageSize is the deploy image of the crash tests: dense enough that
// deploy.image takes the disk a few seconds, past its first durable
// checkpoint (every 256 MiB), so a kill lands while the image streams.
const crashImageSize = 1 << 30

// killAfterWritten is how much of the image must be on the fake disk before
// the site agent is killed.
const killAfterWritten = 320 << 20

// Log lines the tests read: the ramdisk's (in the rack's log file), then
// bcd site's.
const (
	logRunning      = `msg="ramdisk: running command"`
	logStreamBroke  = `msg="ramdisk: image stream broke; resuming"`
	logImageDone    = `msg="ramdisk: image written and verified"`
	logKindDeploy   = "kind=deploy.image"
	logJoined       = `msg="ramdisk joined"`
	logKeptReturned = `msg="returning a result that arrived before its activity"`
)

// TestSiteAgentKilledDuringDeploy kills -9 `bcd site` (a real process)
// while the ramdisk streams the image from it, starts it again on the same
// data dir and ports, and checks that the deploy finishes without running
// anything twice: one download into the site cache, one ramdisk boot and
// token for the deploy, one deploy.image command that ran once on the
// ramdisk (resuming its stream), and the image on disk byte for byte.
func TestSiteAgentKilledDuringDeploy(t *testing.T) {
	bcd := binary(t, "bcd")
	began := time.Now()
	dir := t.TempDir()
	ctx := ctxFor(t, 5*time.Minute)
	cp := startControlPlane(ctx, t, filepath.Join(dir, "cp"))
	api, err := demo.NewClient(cp.APIURL(), cp.RootTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	img := newImageSource(t, dir, crashImageSize)
	t.Logf("image: %d MiB raw, %d MiB zstd, built in %s", img.Raw>>20, img.Size>>20, time.Since(began).Round(100*time.Millisecond))
	fx := registerSite(ctx, t, api, dir, img)

	ports := freePorts(t, 2)
	args := []string{"site", "--control-plane", cp.AgentsURL(), "--ca-file", cp.CAFile(),
		"--data-dir", filepath.Join(dir, "site-agent"), "--boot-listen", addr(ports[0]), "--relay-listen", addr(ports[1])}
	agent := startProc(t, "bcd site", bcd, filepath.Join(dir, "bcd-site.log"), append(args, "--token-file", fx.TokenFile)...)
	agent.waitLog("site agent started", 1, 30*time.Second)
	rack, rackLog := startRack(ctx, t, dir, "http://"+addr(ports[0]))
	m := rack.Machines()[0]
	disks := filepath.Join(dir, "rack", m.Name)
	id := enrollReady(ctx, t, api, fx, m)
	t.Logf("%s is ready as %s after %s", m.Name, id, time.Since(began).Round(100*time.Millisecond))

	before, _ := rack.State(m.Name)
	base := allocated(t, disks)
	joins := countLines(t, agent.log, logJoined)
	if _, err := api.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: crashProfile, ProfileVersion: 1})); err != nil {
		t.Fatal(err)
	}
	written := waitWriting(ctx, t, api, id, disks, base)
	agent.kill9()
	killed := time.Now()
	t.Logf("killed -9 bcd site (pid %d) with %d MiB of the image on disk", agent.pid(), written>>20)
	time.Sleep(time.Second)
	agent.start(args...) // no token: it joined already
	agent.waitLog("site agent started", 2, 30*time.Second)

	if err := waitState(ctx, api, id, "deployed", 3*time.Minute); err != nil {
		t.Fatalf("after the restart: %v\nbcd site:\n%s\nrack:\n%s", err, tail(agent.log, 30), tail(rackLog, 30))
	}
	t.Logf("deployed %s after the kill; test took %s", time.Since(killed).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))

	after, _ := rack.State(m.Name)
	if after.BootedInto != emulate.BootedOS || !after.OSImage || !after.Kexeced {
		t.Errorf("machine after deploy = booted %s, image %v, kexec %v; want the OS from the image through kexec", after.BootedInto, after.OSImage, after.Kexeced)
	}
	if got := after.RamdiskBoots - before.RamdiskBoots; got != 1 || len(after.Tokens)-len(before.Tokens) != 1 {
		t.Errorf("ramdisk boots during the deploy = %d with %d new tokens, want 1 and 1", got, len(after.Tokens)-len(before.Tokens))
	}
	if got := img.gets.Load(); got != 1 {
		t.Errorf("GETs of the source image = %d, want 1 (the site cache downloads it once)", got)
	}
	if got := disksHolding(t, disks, img); len(got) != 1 {
		t.Errorf("disks holding the image byte for byte = %v, want exactly one", got)
	}
	checkDeployImageOnce(t, api, id, rackLog)
	checkResumed(t, rackLog)
	// The retried activity got the result of the ramdisk's one run, kept by
	// the restarted agent's relay, instead of sending the command again.
	if n := countLines(t, agent.log, logKeptReturned); n != 1 {
		t.Errorf("bcd site returned a kept result %d times, want once (the retried deploy.image):\n%s", n, tail(agent.log, 20))
	}
	if n := countLines(t, agent.log, logJoined) - joins; n != 1 {
		t.Errorf("ramdisk joins through the relay during the deploy = %d over both runs of bcd site, want 1", n)
	}
}

// waitWriting waits until deploy.image is sent and killAfterWritten bytes
// of the image are on the machine's disks, and returns how many are.
func waitWriting(ctx context.Context, t *testing.T, api *demo.Client, id, disks string, base int64) int64 {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n := allocated(t, disks) - base
		if n < killAfterWritten {
			continue
		}
		cmds, err := commandsOf(ctx, api, id)
		if err != nil {
			t.Fatal(err)
		}
		if c := lastOfKind(cmds, "deploy.image"); c == nil || c.Status != "sent" {
			t.Fatalf("with %d MiB on disk, deploy.image = %v; want it sent (the image is too small to catch mid-write?)", n>>20, c)
		}
		return n
	}
	t.Fatal("the ramdisk did not start writing the image within 2 minutes")
	return 0
}

// checkDeployImageOnce: the deploy's commands are the verb's, in order,
// each once and succeeded, and the ramdisk ran deploy.image once.
func checkDeployImageOnce(t *testing.T, api *demo.Client, id, rackLog string) {
	t.Helper()
	cmds, err := commandsOf(context.Background(), api, id)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range cmds[len(enrollKinds):] {
		kinds = append(kinds, c.Kind)
		if c.Status != "succeeded" {
			t.Errorf("command %s %s = %s (attempt %d, %s), want succeeded", c.Step, c.Kind, c.Status, c.Attempt, c.Error)
		}
		if c.Kind == "deploy.image" && c.Attempt < 2 {
			t.Errorf("deploy.image attempt = %d, want at least 2 (its activity was retried after the kill)", c.Attempt)
		}
	}
	if diff := cmp.Diff(deployKinds, kinds); diff != "" {
		t.Errorf("commands list of the deploy (-want +got):\n%s", diff)
	}
	if n := countLines(t, rackLog, logRunning, logKindDeploy); n != 1 {
		t.Errorf("the ramdisk started deploy.image %d times, want 1", n)
	}
}

// checkResumed: the kill broke the ramdisk's image stream, and the one
// stream that finished resumed at the last durable offset the ramdisk had:
// every byte below it compared equal and was skipped, every byte above it
// written once.
func checkResumed(t *testing.T, rackLog string) {
	t.Helper()
	broke := grepLines(t, rackLog, logStreamBroke)
	if len(broke) == 0 {
		t.Errorf("the ramdisk never logged %q: the kill did not land while the image streamed", logStreamBroke)
		return
	}
	done := grepLines(t, rackLog, logImageDone)
	if len(done) != 1 {
		t.Errorf("the ramdisk logged %q %d times, want once", logImageDone, len(done))
		return
	}
	from := intField(t, broke[len(broke)-1], "from")
	image, written, skipped := intField(t, done[0], "imageBytes"), intField(t, done[0], "written"), intField(t, done[0], "skipped")
	t.Logf("the stream broke %d times; it resumed from %d MiB: %d MiB skipped, %d MiB written", len(broke), from>>20, skipped>>20, written>>20)
	if skipped != from || written+skipped != image {
		t.Errorf("resumed image write = %d skipped + %d written of %d, want %d skipped (the durable offset) and the rest written once",
			skipped, written, image, from)
	}
}

// intField reads key=<integer> from a text log line.
func intField(t *testing.T, line, key string) int64 {
	t.Helper()
	m := regexp.MustCompile(`\b` + key + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in log line %q", key, line)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// startControlPlane starts a control plane in this process on loopback
// ports, with a CA and the emulated rack's hardware profile in dir.
func startControlPlane(ctx context.Context, t *testing.T, dir string) *controlplane.ControlPlane {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Init(filepath.Join(dir, "pki"), "crash.better-compute.test"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(crashHardware), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Listen: "127.0.0.1:0", TemporalListen: "127.0.0.1:0",
		UIListen: "off", AgentsListen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("controlplane.Start = %v", err)
	}
	t.Cleanup(cp.Stop)
	return cp
}
