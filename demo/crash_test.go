//go:build fakehw

package demo_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// The site agent crash test's sizes come from the interval at which the
// ramdisk makes its image writes durable (disk.SyncEvery), not from copies
// of it. Kill k of bcd site comes once the stream it breaks has written a
// quarter interval past the image's k-th durable checkpoint, so the write
// resumes at least k intervals in; the image is an interval longer than the
// last checkpoint a kill waits for, so the last kill lands while it streams.
const (
	crashKills     = 2
	crashImageSize = (crashKills + 1) * disk.SyncEvery
)

// killPoint is how far into the image the stream that kill k (from 1)
// breaks has written when the kill comes.
func killPoint(k int) int64 { return int64(k)*disk.SyncEvery + disk.SyncEvery/4 }

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
// data dir and ports, kills it again while the resumed stream runs, starts
// it once more, and checks that the deploy finishes without running
// anything twice: one download into the site cache, one ramdisk boot and
// token for the deploy, one deploy.image command that ran once on the
// ramdisk, each resumed stream beginning at the offset the ramdisk had made
// durable and writing nothing below it again (per the fake disk's write
// log), every step in its first attempt but deploy.image, retried once per
// attempt a kill ended, and the image on disk byte for byte.
func TestSiteAgentKilledDuringDeploy(t *testing.T) {
	began := time.Now()
	dir := t.TempDir()
	ctx := ctxFor(t, 5*time.Minute)
	img := newImageSource(t, dir, crashImageSize)
	t.Logf("image: %d MiB raw, %d MiB zstd, built in %s", img.Raw>>20, img.Size>>20, time.Since(began).Round(100*time.Millisecond))
	rig := startSiteAgentRig(ctx, t, dir, img, "--log-level", "debug")
	cp, api, agent, args, rack, rackLog, m, id := rig.cp, rig.api, rig.agent, rig.args, rig.rack, rig.rackLog, rig.m, rig.node
	disks := filepath.Join(dir, "rack", m.Name)
	t.Logf("%s is ready as %s after %s", m.Name, id, time.Since(began).Round(100*time.Millisecond))

	before, _ := rack.State(m.Name)
	if n := len(imageRuns(t, disks)); n != 0 {
		t.Fatalf("streams of an image onto %s before the deploy = %d, want 0", m.Name, n)
	}
	joins := countLines(t, agent.log, logJoined)
	if _, err := api.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: crashProfile, ProfileVersion: 1})); err != nil {
		t.Fatal(err)
	}
	var sent *v1.Command
	var killed time.Time
	ended := map[int32]bool{} // the attempts of deploy.image a kill ended
	for k := 1; k <= crashKills; k++ {
		var written int64
		sent, written = waitWriting(ctx, t, api, id, disks, k)
		agent.kill9()
		killed = time.Now()
		time.Sleep(time.Second) // Temporal sees the dead worker's connection go
		attempt, running := pendingAttempt(ctx, t, cp, sent)
		if running {
			ended[attempt] = true
		}
		t.Logf("kill %d: killed -9 bcd site (pid %d) with stream %d at %d MiB of the image; deploy.image's attempt %d was running: %v",
			k, agent.pid(), k, written>>20, attempt, running)
		agent.start(args...) // no token: it joined already
		agent.waitLog("site agent started", k+1, 30*time.Second)
	}
	if !ended[1] {
		t.Errorf("the first kill did not end deploy.image's first attempt (attempts it ended: %v); want it running then", ended)
	}

	if err := waitState(ctx, api, id, "deployed", 3*time.Minute); err != nil {
		t.Fatalf("after the restarts: %v\nbcd site:\n%s\nrack:\n%s", err, tail(agent.log, 30), tail(rackLog, 30))
	}
	t.Logf("deployed %s after the last kill; test took %s", time.Since(killed).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))

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
	cmds, err := commandsOf(ctx, api, id)
	if err != nil {
		t.Fatal(err)
	}
	// Each ended attempt was retried once; the last attempt ran to the end.
	checkDeployRun(t, cmds, sent.RunId, map[string]int32{"deploy.image": int32(1 + len(ended))})
	if n := countLines(t, rackLog, logRunning, logKindDeploy); n != 1 {
		t.Errorf("the ramdisk started deploy.image %d times, want 1", n)
	}
	checkResumed(t, rackLog, imageRuns(t, disks), img.Raw)
	// A retried activity gets the result of the ramdisk's one run instead of
	// sending the command again: kept by the relay when the result came
	// first, else awaited; which came first is Temporal's timing.
	if n := countLines(t, agent.log, logKeptReturned); n > 1 {
		t.Errorf("bcd site returned a kept result %d times, want at most once (the last deploy.image attempt):\n%s", n, tail(agent.log, 20))
	}
	if n := countLines(t, agent.log, logJoined) - joins; n != 1 {
		t.Errorf("ramdisk joins through the relay during the deploy = %d over the runs of bcd site, want 1", n)
	}
	scanCrashSecrets(t, dir, rack, m.Name, storeSecrets(t, cp.Store()),
		agent.log, rackLog, filepath.Join(dir, "cp", "control-plane.log"))
}

// scanCrashSecrets searches the crash setup's logs, written at debug by
// every process (and by the processes killed -9 mid-write), for the secrets
// the run made: the root and site tokens and private keys kept under dir,
// each ramdisk boot's discovery token, the BMC password, and the keys given.
func scanCrashSecrets(t *testing.T, dir string, rack *emulate.Rack, machine string, keys []secret, logs ...string) {
	t.Helper()
	secrets := append(secretsIn(t, dir), passwordSecret("the BMC password", "admin", crashBMCPassword)...)
	secrets = append(secrets, keys...)
	st, _ := rack.State(machine)
	for i, tok := range st.Tokens {
		secrets = append(secrets, tokenSecret(fmt.Sprintf("the discovery token of %s's boot %d", machine, i+1), tok)...)
	}
	if len(st.Tokens) == 0 {
		t.Error("no discovery token to search for: the machine never booted its ramdisk?")
	}
	n := scanForSecrets(t, secrets, logs...)
	t.Logf("searched %d KiB of logs for %d forms of secrets", n>>10, len(secrets))
}

// waitWriting waits until the k-th stream of the image onto the machine's
// disks has written killPoint(k) bytes into it, and returns deploy.image's
// command, which must be in flight, and how far the stream got.
func waitWriting(ctx context.Context, t *testing.T, api *demo.Client, id, disks string, k int) (*v1.Command, int64) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runs := imageRuns(t, disks)
		if len(runs) > k {
			t.Fatalf("streams of the image before kill %d = %d, want %d: a stream broke that no kill broke", k, len(runs), k)
		}
		if len(runs) < k || runEnd(runs[k-1]) < killPoint(k) {
			continue
		}
		cmds, err := commandsOf(ctx, api, id)
		if err != nil {
			t.Fatal(err)
		}
		c := lastOfKind(cmds, "deploy.image")
		if c == nil || c.Status != "sent" {
			t.Fatalf("with stream %d at %d MiB, deploy.image = %v; want it sent (the image is too small to catch mid-write?)", k, runEnd(runs[k-1])>>20, c)
		}
		return c, runEnd(runs[k-1])
	}
	t.Fatalf("stream %d of the image did not reach %d MiB within 2 minutes", k, killPoint(k)>>20)
	return nil, 0
}

// pendingAttempt asks Temporal for the activity of the step c, pending in
// its run: its attempt, and whether a worker has started it.
func pendingAttempt(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, c *v1.Command) (int32, bool) {
	t.Helper()
	d, err := cp.Client().DescribeWorkflowExecution(ctx, c.WorkflowId, c.RunId)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.PendingActivities {
		if p.ActivityId == c.Step {
			return p.Attempt, p.State == enumspb.PENDING_ACTIVITY_STATE_STARTED
		}
	}
	t.Fatalf("%s/%s has no pending activity %s", c.WorkflowId, c.RunId, c.Step)
	return 0, false
}

// checkResumed: each kill broke the image stream once, and the stream after
// kill k (a WriteImage run in the disk's write log) began at the offset the
// ramdisk had made durable and logged, at least k intervals in, and wrote
// nothing below it again. Every stream writes one range up from where it
// began: the first from 0, each later one from at or below where the one
// before stopped, the last to the end of the image, which the ramdisk
// reports as skipped below the last resume and written above it.
func checkResumed(t *testing.T, rackLog string, runs [][]disk.Extent, image int64) {
	t.Helper()
	if len(runs) != crashKills+1 {
		t.Errorf("streams of the image onto the disk = %d, want %d (one, and one more after each kill)", len(runs), crashKills+1)
		return
	}
	var resumes []int64
	var prevEnd, again int64
	for k, run := range runs {
		start, end, ok := span(run)
		switch {
		case !ok:
			t.Errorf("stream %d wrote %d extents that are not one range up from where it began", k+1, len(run))
			return
		case k == 0 && start != 0:
			t.Errorf("the first stream began at %d, want 0", start)
		case k > 0 && start < int64(k)*disk.SyncEvery:
			t.Errorf("after kill %d the stream wrote from %d MiB up, want from at least %d MiB (durable checkpoint %d; below it a resume only compares)",
				k, start>>20, int64(k)*disk.SyncEvery>>20, k)
		case k > 0 && start > prevEnd:
			t.Errorf("after kill %d the stream resumed at %d MiB, past where the killed one stopped (%d MiB)", k, start>>20, prevEnd>>20)
		}
		if k > 0 {
			resumes = append(resumes, start)
			again += prevEnd - start
		}
		t.Logf("stream %d wrote the image from %d MiB to %d MiB", k+1, start>>20, end>>20)
		prevEnd = end
	}
	t.Logf("written twice: %d MiB (between each resume offset and where the killed stream stopped)", again>>20)
	if prevEnd != image {
		t.Errorf("the last stream stopped at %d, want the end of the image, %d", prevEnd, image)
	}
	t.Logf("the ramdisk's stream broke %d times (each failed try counted)", countLines(t, rackLog, logStreamBroke))
	if diff := cmp.Diff(resumes, loggedResumes(t, rackLog)); diff != "" {
		t.Errorf("resume offsets: on the disk (-) and in the ramdisk's log (+):\n%s", diff)
	}
	done := grepLines(t, rackLog, logImageDone)
	if len(done) != 1 {
		t.Errorf("the ramdisk logged %q %d times, want once", logImageDone, len(done))
		return
	}
	from := resumes[len(resumes)-1]
	got, written, skipped := intField(t, done[0], "imageBytes"), intField(t, done[0], "written"), intField(t, done[0], "skipped")
	if skipped != from || written != image-from || got != image {
		t.Errorf("last image write = %d skipped + %d written of %d, want %d skipped (the last resume offset) and %d written",
			skipped, written, got, from, image-from)
	}
}

// loggedResumes are the offsets the ramdisk said it resumes from, each
// once: it logs one line per failed try, and a try fails until the
// restarted bcd site serves the image again.
func loggedResumes(t *testing.T, rackLog string) []int64 {
	t.Helper()
	var out []int64
	for _, line := range grepLines(t, rackLog, logStreamBroke) {
		if from := intField(t, line, "from"); len(out) == 0 || out[len(out)-1] != from {
			out = append(out, from)
		}
	}
	return out
}

// imageRuns are the streams of an image onto the machine's fake disks, as
// their write logs hold them; more than one disk written fails the test.
func imageRuns(t *testing.T, disks string) [][]disk.Extent {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(disks, "*.img"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]disk.Extent
	var written []string
	for _, p := range paths {
		runs, err := disk.ImageWrites(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) > 0 {
			out, written = runs, append(written, filepath.Base(p))
		}
	}
	if len(written) > 1 {
		t.Fatalf("disks with an image written = %v, want one", written)
	}
	return out
}

// span is where a run of writes began and ended, and whether each write
// began where the one before ended.
func span(run []disk.Extent) (start, end int64, ok bool) {
	if len(run) == 0 {
		return 0, 0, false
	}
	start, end = run[0].Off, run[0].Off
	for _, e := range run {
		if e.Off != end {
			return start, end, false
		}
		end += e.N
	}
	return start, end, true
}

// runEnd is where a run of writes has got to.
func runEnd(run []disk.Extent) int64 {
	if len(run) == 0 {
		return 0
	}
	last := run[len(run)-1]
	return last.Off + last.N
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
	f, err := os.OpenFile(filepath.Join(dir, "control-plane.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// Everything at debug, the embedded Temporal server too: the logs are
	// searched for secrets at the end (scanCrashSecrets).
	cp, err := controlplane.Start(ctx, controlplane.Config{DataDir: dir, Listen: "127.0.0.1:0", TemporalListen: "127.0.0.1:0",
		UIListen: "off", AgentsListen: "127.0.0.1:0", TemporalLogLevel: slog.LevelDebug,
		Logger: slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("controlplane.Start = %v", err)
	}
	t.Cleanup(cp.Stop)
	return cp
}

// TestSiteAgentKilledDuringABMCCall kills -9 `bcd site` while its
// power.setPower waits on a BMC that holds its answers, starts it again
// with the BMC answering, and checks that the call's next attempt comes
// within the BMC calls' heartbeat timeout (20 s), not at their 2-minute
// start-to-close: nothing tells Temporal that a killed worker's attempt is
// gone but its silence. The node keeps its state and the machine powers on.
func TestSiteAgentKilledDuringABMCCall(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxFor(t, 5*time.Minute)
	rig := startSiteAgentRig(ctx, t, dir, newImageSource(t, dir, 1<<20))
	cp, api, agent, rack, m, id := rig.cp, rig.api, rig.agent, rig.rack, rig.m, rig.node
	if st, _ := rack.State(m.Name); st.Power != "off" {
		t.Fatalf("%s is %s after enrolling, want off", m.Name, st.Power)
	}

	if err := rack.SetBMCFaults(m.Name, redfishbmc.Faults{Slow: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Metal.Power(ctx, connect.NewRequest(&v1.PowerRequest{NodeId: id, Action: "on"})); err != nil {
		t.Fatal(err)
	}
	var sent *v1.Command
	for deadline := time.Now().Add(time.Minute); sent == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("power.setPower was not sent within a minute")
		}
		cmds, err := commandsOf(ctx, api, id)
		if err != nil {
			t.Fatal(err)
		}
		if c := lastOfKind(cmds, "power.setPower"); c != nil && c.Status == "sent" {
			if _, running := pendingAttempt(ctx, t, cp, c); running {
				sent = c
			}
		}
	}
	time.Sleep(time.Second) // the call waits on the BMC
	agent.kill9()
	killed := time.Now()
	if err := rack.SetBMCFaults(m.Name, redfishbmc.Faults{}); err != nil {
		t.Fatal(err)
	}
	agent.start(rig.args...)
	agent.waitLog("site agent started", 2, 30*time.Second)

	var done *v1.Command
	for deadline := killed.Add(3 * time.Minute); done == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("power.setPower did not end within 3 minutes of the kill\nbcd site:\n%s", tail(agent.log, 20))
		}
		cmds, err := commandsOf(ctx, api, id)
		if err != nil {
			continue
		}
		if c := lastOfKind(cmds, "power.setPower"); c != nil && c.Step == sent.Step && c.RunId == sent.RunId && c.Status != "sent" {
			done = c
		}
	}
	took := time.Since(killed)
	t.Logf("power.setPower %s in attempt %d, %s after the kill", done.Status, done.Attempt, took.Round(100*time.Millisecond))
	if done.Status != "succeeded" || done.Attempt != 2 {
		t.Errorf("power.setPower = %s in attempt %d (%s), want succeeded in attempt 2", done.Status, done.Attempt, done.Error)
	}
	if took > 45*time.Second {
		t.Errorf("power.setPower ended %s after the kill, want within the 20-s heartbeat timeout and a retry, not the 2-minute start-to-close", took.Round(time.Second))
	}
	if st, _ := rack.State(m.Name); st.Power != "on" {
		t.Errorf("%s is %s after the power verb, want on", m.Name, st.Power)
	}
	if err := waitState(ctx, api, id, "ready", 10*time.Second); err != nil {
		t.Errorf("node after the power verb: %v", err)
	}
}
