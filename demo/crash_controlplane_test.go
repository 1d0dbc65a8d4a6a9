//go:build fakehw

package demo_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/siteagent"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestControlPlaneKilledMidWorkflow kills -9 `better-compute serve` (a real
// process with its embedded Temporal and private PostgreSQL) while a deploy's
// deploy.image runs, starts it again on the same data dir and ports, and
// checks that the same workflow run resumes and completes: the node is
// deployed with the image on disk, every step of the run is in the command
// log once, succeeded in its first attempt, the ramdisk ran deploy.image
// once, and the new serve adopted the PostgreSQL that outlived the old one.
// The site agent (in this process) keeps its Temporal client across the
// frontend's absence.
func TestControlPlaneKilledMidWorkflow(t *testing.T) {
	bc := binary(t, "better-compute")
	began := time.Now()
	dir := t.TempDir()
	ctx := ctxFor(t, 5*time.Minute)
	cpDir := filepath.Join(dir, "cp")
	if out, err := exec.Command(bc, "pki", "init", "--trust-domain", "t.test", "--data-dir", cpDir).CombinedOutput(); err != nil {
		t.Fatalf("better-compute pki init = %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(cpDir, "config.yaml"), []byte(crashHardware), 0o600); err != nil {
		t.Fatal(err)
	}
	pgDir := filepath.Join(cpDir, "postgres")
	t.Cleanup(func() { stopPostgres(t, pgDir) }) // after serve's own stop: the last word on its cluster
	ports := freePorts(t, 3)
	args := []string{"serve", "--data-dir", cpDir, "--listen", addr(ports[0]), "--temporal-listen", addr(ports[1]),
		"--ui-listen", "off", "--agents-listen", addr(ports[2]), "--log-level", "debug", "--temporal-log-level", "debug"}
	serve := startProc(t, "better-compute serve", bc, filepath.Join(dir, "serve.log"), args...)
	api := waitAPI(ctx, t, serve, "http://"+addr(ports[0]), filepath.Join(cpDir, "root-token"))
	t.Logf("serve is up after %s", time.Since(began).Round(100*time.Millisecond))

	img := newImageSource(t, dir, 512<<20)
	fx := registerSite(ctx, t, api, dir, img)
	agentLog := filepath.Join(dir, "site-agent.log")
	agent := startAgent(ctx, t, "https://"+addr(ports[2]), filepath.Join(cpDir, "pki", "ca.crt"), fx.TokenFile, dir, agentLog)
	rack, rackLog := startRack(ctx, t, dir, agent.BootURL())
	m := rack.Machines()[0]
	id := enrollReady(ctx, t, api, fx, m)
	t.Logf("%s is ready as %s after %s", m.Name, id, time.Since(began).Round(100*time.Millisecond))

	before, _ := rack.State(m.Name)
	if _, err := api.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: crashProfile, ProfileVersion: 1})); err != nil {
		t.Fatal(err)
	}
	sent := waitSent(ctx, t, api, id, "deploy.image")
	waitLogFile(t, rackLog, 2*time.Minute, logRunning, logKindDeploy) // the site agent's activity is relaying it
	pg := postmasterPID(t, pgDir)
	serve.kill9()
	killed := time.Now()
	t.Logf("killed -9 serve (pid %d) while the ramdisk ran %s %s; run %s", serve.pid(), sent.Step, sent.Kind, sent.RunId)
	if !alive(pg) {
		t.Errorf("PostgreSQL (pid %d) died with serve; want it to outlive a kill -9 of its parent", pg)
	}
	time.Sleep(time.Second)
	serve.start(args...)
	api = waitAPI(ctx, t, serve, "http://"+addr(ports[0]), filepath.Join(cpDir, "root-token"))
	t.Logf("serve is back %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	if err := waitState(ctx, api, id, "deployed", 3*time.Minute); err != nil {
		t.Fatalf("after the restart: %v\nserve:\n%s\nsite agent:\n%s", err, tail(serve.log, 30), tail(agentLog, 30))
	}
	t.Logf("deployed %s after the kill; test took %s", time.Since(killed).Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))

	if n := countLines(t, agentLog, `msg="site agent failed"`); n != 0 {
		t.Errorf("the site agent failed %d times while the frontend was away, want 0:\n%s", n, tail(agentLog, 20))
	}
	if n := countLines(t, serve.log, `msg="adopted running postgres"`); n != 1 {
		t.Errorf("serve logs of adopting the running PostgreSQL = %d, want 1 (the restart took over the survivor)", n)
	}
	checkRunResumed(t, api, id, sent)
	after, _ := rack.State(m.Name)
	if after.BootedInto != emulate.BootedOS || !after.OSImage || !after.Kexeced {
		t.Errorf("machine after deploy = booted %s, image %v, kexec %v; want the OS from the image through kexec", after.BootedInto, after.OSImage, after.Kexeced)
	}
	if got := after.RamdiskBoots - before.RamdiskBoots; got != 1 || len(after.Tokens)-len(before.Tokens) != 1 {
		t.Errorf("ramdisk boots during the deploy = %d with %d new tokens, want 1 and 1", got, len(after.Tokens)-len(before.Tokens))
	}
	if got := disksHolding(t, filepath.Join(dir, "rack", m.Name), img); len(got) != 1 {
		t.Errorf("disks holding the image byte for byte = %v, want exactly one", got)
	}
	if n := countLines(t, rackLog, logRunning, logKindDeploy); n != 1 {
		t.Errorf("the ramdisk started deploy.image %d times, want 1", n)
	}
	if got := img.gets.Load(); got != 1 {
		t.Errorf("GETs of the source image = %d, want 1", got)
	}
	// serve's settings keys stay in its database; its key files, tokens and
	// every boot's discovery token are searched for in every log.
	scanCrashSecrets(t, dir, rack, m.Name, nil, serve.log, agentLog, rackLog)
}

// checkRunResumed: the node has one deploy run, the one that was running at
// the kill, completed; its steps are the verb's, in order, once each,
// succeeded, each in its first attempt: the site agent outlived serve, so a
// site step run again (its activity timed out while serve was away) would
// show attempt 2.
func checkRunResumed(t *testing.T, api *demo.Client, id string, sent *v1.Command) {
	t.Helper()
	// The node is deployed a moment before its workflow closes, and the
	// list (Temporal's visibility) follows a moment later still.
	var deploys []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, err := api.Workflows.List(context.Background(), connect.NewRequest(&v1.ListWorkflowsRequest{NodeId: id}))
		if err != nil {
			t.Fatal(err)
		}
		deploys = nil
		running := false
		for _, w := range r.Msg.Items {
			if w.Type == wf.Deploy {
				deploys = append(deploys, fmt.Sprintf("%s/%s %s", w.WorkflowId, w.RunId, w.Status))
				running = running || w.Status == "running"
			}
		}
		if !running || time.Now().After(deadline) {
			break
		}
	}
	want := []string{fmt.Sprintf("%s/%s completed", sent.WorkflowId, sent.RunId)}
	if diff := cmp.Diff(want, deploys); diff != "" {
		t.Errorf("deploy runs of the node (-want +got):\n%s", diff)
	}
	cmds, err := commandsOf(context.Background(), api, id)
	if err != nil {
		t.Fatal(err)
	}
	checkDeployRun(t, cmds, sent.RunId, nil)
}

// waitAPI waits until serve answers the API with its root token.
func waitAPI(ctx context.Context, t testing.TB, serve *proc, url, tokenFile string) *demo.Client {
	t.Helper()
	var lastErr error
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if serve.exited() {
			t.Fatalf("serve exited:\n%s", tail(serve.log, 40))
		}
		api, err := demo.NewClient(url, tokenFile)
		if err == nil {
			if _, err = api.Sites.List(ctx, connect.NewRequest(&v1.ListSitesRequest{})); err == nil {
				return api
			}
		}
		lastErr = err
	}
	t.Fatalf("serve's API did not answer within 90s (%v):\n%s", lastErr, tail(serve.log, 40))
	return nil
}

// waitSent waits until the node's command of kind is sent and returns it.
func waitSent(ctx context.Context, t *testing.T, api *demo.Client, id, kind string) *v1.Command {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		cmds, err := commandsOf(ctx, api, id)
		if err != nil {
			t.Fatal(err)
		}
		if c := lastOfKind(cmds, kind); c != nil && c.Status == "sent" {
			return c
		} else if c != nil {
			t.Fatalf("%s %s = %s before it could be caught sent", c.Step, kind, c.Status)
		}
	}
	t.Fatalf("%s was not sent within 2 minutes", kind)
	return nil
}

// waitLogFile waits until the file at path has a line containing all of subs.
func waitLogFile(t *testing.T, path string, timeout time.Duration, subs ...string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); countLines(t, path, subs...) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in %s within %s", subs, path, timeout)
		}
	}
}

// startAgent starts a site agent in this process.
func startAgent(ctx context.Context, t *testing.T, cpURL, caFile, tokenFile, dir, logPath string) *siteagent.Agent {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a, err := siteagent.Start(ctx, siteagent.Config{ControlPlaneURL: cpURL, CAFile: caFile, TokenFile: tokenFile,
		DataDir: filepath.Join(dir, "site-agent"), BootListen: "127.0.0.1:0", RelayListen: "127.0.0.1:0",
		Drivers: demo.Drivers(), Logger: slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		f.Close()
		t.Fatalf("siteagent.Start = %v", err)
	}
	t.Cleanup(func() { a.Stop(); f.Close() })
	return a
}

// postmasterPID reads the running postmaster's pid from dir/postmaster.pid.
func postmasterPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		t.Fatalf("read postmaster.pid: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("postmaster.pid starts with %q", first)
	}
	return pid
}

// stopPostgres stops a postmaster still running in dir (serve's stop should
// have): SIGINT, PostgreSQL's fast shutdown, by its pid.
func stopPostgres(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || !alive(pid) || strings.TrimSpace(string(comm)) != "postgres" {
		return
	}
	t.Logf("PostgreSQL (pid %d) outlived serve; stopping it", pid)
	_ = syscall.Kill(pid, syscall.SIGINT)
	if !waitGone(pid, 30*time.Second) {
		t.Errorf("PostgreSQL (pid %d) did not stop within 30s of SIGINT", pid)
	}
}
