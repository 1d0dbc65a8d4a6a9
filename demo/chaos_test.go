//go:build fakehw

package demo_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/chaos"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store/pgcluster"
	wf "github.com/better-compute/better-compute/workflows"
)

// chaosProcs are the Procfile's processes the chaos run starts: one of each
// Temporal service, one `serve --only api`, one `serve --only worker`.
var chaosProcs = []string{"frontend-1", "history-1", "matching-1", "temporal-worker", "api-1", "worker-1"}

// TestChaos is the chaos harness: CHAOS_MACHINES machines of the emulated
// rack (default 4) each go through CHAOS_LOOPS lifecycles (default 3; the
// first from enroll: enroll → ready, then each deploy → deployed →
// undeploy → ready) against real processes - Temporal's services and the
// control plane's api and worker as in deploy/cluster/Procfile, bcd site,
// a private PostgreSQL - while a driver, from a seed it prints (CHAOS_SEED
// replays it), kills -9 one process at a time (every kind in turn: api,
// worker, bcd site, a running ramdisk, each Temporal service, PostgreSQL),
// restarting it after a random delay, or cuts or slows the site's links to
// the control plane (a proxy on bcd site's --control-plane and Temporal
// addresses). After the run it checks the invariants (checkChaos) and
// prints a summary. task chaos runs 100 lifecycles.
func TestChaos(t *testing.T) {
	seed, err := chaos.Seed()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("chaos: seed %d (replay with %s=%d)\n", seed, chaos.SeedEnv, seed)
	machines, loops := envInt(t, "CHAOS_MACHINES", 4), envInt(t, "CHAOS_LOOPS", 3)
	began := time.Now()
	ctx := ctxFor(t, time.Duration(10+machines*loops)*time.Minute)
	e := startChaosEnv(ctx, t, machines)
	t.Logf("chaos: everything up after %s", time.Since(began).Round(100*time.Millisecond))

	d := &chaos.Driver{Seed: seed, Faults: e.faults(), Every: [2]time.Duration{time.Second, 4 * time.Second},
		Down: [2]time.Duration{200 * time.Millisecond, 3 * time.Second},
		// A ramdisk runs only while a machine inspects, wipes or deploys:
		// the ramdisk kill waits up to 20 s for one rather than missing.
		Patience: 20 * time.Second, Poll: 250 * time.Millisecond, Log: func(f string, a ...any) { t.Logf(f, a...) }}
	dctx, stop := context.WithCancel(ctx)
	driven := make(chan struct{})
	go func() { defer close(driven); d.Run(dctx) }()

	runStart := time.Now()
	var wg sync.WaitGroup
	results := make([]lifecycleRun, machines)
	for i, m := range e.rack.Machines() {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = e.lifecycles(ctx, m, loops, d.Missed) }()
	}
	wg.Wait()
	stop()
	<-driven
	e.ensureUp(t)
	s := chaos.Summary{Seed: seed, Wanted: machines * loops, Took: time.Since(runStart), Driver: d}
	for _, r := range results {
		s.Lifecycles += r.done
	}
	s.Checks = e.check(ctx, t, results)
	fmt.Print(s.String())
	if slices.ContainsFunc(s.Checks, func(c chaos.Check) bool { return len(c.Violations) > 0 }) {
		e.explain(ctx, t, results)
	}
	for _, c := range s.Checks {
		if len(c.Violations) > 0 {
			t.Errorf("invariant %s violated (seed %d): %s", c.Name, seed, strings.Join(c.Violations, "; "))
		}
	}
	if missed := d.Missed(); len(missed) > 0 {
		t.Errorf("fault kinds never injected: %v (a longer run, or more machines, gives each a turn)", missed)
	}
	if errs := d.Errors(); len(errs) > 0 {
		t.Errorf("the driver failed to inject or restart: %v", errs)
	}
	t.Logf("chaos: test took %s", time.Since(began).Round(time.Second))
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q, want a positive integer", name, s)
	}
	return n
}

// chaosEnv is everything the chaos run started.
type chaosEnv struct {
	t         *testing.T
	dir       string
	pgDir     string
	pgMu      sync.Mutex
	pg        *pgcluster.Cluster
	c         *clusterRun
	api       *demo.Client
	agent     *proc
	agentArgs []string
	rack      *emulate.Rack
	img       *imageSource
	fx        siteFixture
	toCP      *chaos.Proxy // bcd site → the agents listener (https)
	toT       *chaos.Proxy // bcd site (and the api, which gives its address at the join) → Temporal's frontend
}

// startChaosEnv starts PostgreSQL, the Procfile's Temporal services and the
// control plane (chaosProcs), the proxies, bcd site and the rack.
func startChaosEnv(ctx context.Context, t *testing.T, machines int) *chaosEnv {
	bc, bcd := binary(t, "better-compute"), binary(t, "bcd")
	e := &chaosEnv{t: t, dir: keptDir(t)}
	// A short directory: the socket lives in it, so its URL survives restarts.
	pgDir, err := os.MkdirTemp("", "chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	e.pgDir = filepath.Join(pgDir, "pg")
	t.Cleanup(func() { os.RemoveAll(pgDir) })
	if err := e.startPG(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.pgMu.Lock(); e.pg.Stop(); e.pgMu.Unlock() }) // last: after every process
	if err := e.pg.CreateDatabase(ctx, "better_compute"); err != nil {
		t.Fatal(err)
	}
	c := &clusterRun{bc: bc, dir: e.dir, dataDir: filepath.Join(e.dir, "cp"), procs: map[string]*proc{}, starts: map[string]int{}}
	c.vars = clusterVars(t, bc, c.dataDir, e.pg)
	c.lines = readProcfile(t, clusterProcfile, c.vars)
	e.c = c
	frontend := c.addr("FRONTEND_1_PORT")
	if e.toT, err = chaos.Listen(frontend); err != nil {
		t.Fatal(err)
	}
	if e.toCP, err = chaos.Listen(c.addr("AGENTS_1_PORT")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.toT.Close)
	t.Cleanup(e.toCP.Close)
	// One frontend: the worker dials it, the api the proxy (the api tells
	// bcd site at its join the first of its --temporal-address).
	setFlag(t, c.lines["worker-1"], "--temporal-address", frontend)
	setFlag(t, c.lines["api-1"], "--temporal-address", e.toT.Addr())
	chaosSetup(t, c)
	for _, name := range chaosProcs[:4] {
		c.start(t, name)
	}
	for _, name := range chaosProcs[:4] {
		c.waitUp(t, name)
	}
	c.start(t, "api-1")
	e.api = c.api(t, "api-1")
	c.start(t, "worker-1")
	c.waitUp(t, "worker-1")

	e.img = newImageSource(t, e.dir, 16<<20)
	e.fx = registerSite(ctx, t, e.api, e.dir, e.img)
	ports := freePorts(t, 2)
	e.agentArgs = []string{"site", "--control-plane", "https://" + e.toCP.Addr(), "--ca-file", filepath.Join(c.dataDir, "pki", "ca.crt"),
		"--data-dir", filepath.Join(e.dir, "site-agent"), "--boot-listen", addr(ports[0]), "--relay-listen", addr(ports[1]), "--log-level", "debug"}
	e.agent = startProc(t, "bcd site", bcd, filepath.Join(e.dir, "bcd-site.log"), append(e.agentArgs, "--token-file", e.fx.TokenFile)...)
	e.agent.waitLog("site agent started", 1, 60*time.Second)
	e.rack = startChaosRack(ctx, t, e.dir, "http://"+addr(ports[0]), machines)
	return e
}

// keptDir is the run's directory (logs of every process, the rack's
// disks), removed after a pass and kept after a failure, for its logs.
func keptDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "chaos-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos: the run's logs are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// chaosSetup is run.sh's set-up: Temporal's schema, the CA, the hardware.
func chaosSetup(t *testing.T, c *clusterRun) {
	t.Helper()
	args := append([]string{"temporal", "setup-schema"}, strings.Fields(c.vars["TEMPORAL_ARGS"])...)
	if out, err := execOut(c.bc, args...); err != nil {
		t.Fatalf("better-compute temporal setup-schema = %v\n%s", err, out)
	}
	if out, err := execOut(c.bc, "pki", "init", "--trust-domain", "t.test", "--data-dir", c.dataDir); err != nil {
		t.Fatalf("better-compute pki init = %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(c.dataDir, "config.yaml"), []byte(crashHardware), 0o600); err != nil {
		t.Fatal(err)
	}
}

func execOut(bin string, args ...string) ([]byte, error) {
	return exec.Command(bin, args...).CombinedOutput()
}

// setFlag sets the value after flag in argv.
func setFlag(t *testing.T, argv []string, flag, value string) {
	i := slices.Index(argv, flag)
	if i < 0 || i+1 >= len(argv) {
		t.Fatalf("no %s in %v", flag, argv)
	}
	argv[i+1] = value
}

func startChaosRack(ctx context.Context, t *testing.T, dir, bootURL string, machines int) *emulate.Rack {
	f, err := os.OpenFile(filepath.Join(dir, "rack.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	rack, err := emulate.Start(ctx, emulate.Config{Machines: machines, Dir: filepath.Join(dir, "rack"), BootURL: bootURL,
		Username: "admin", Password: crashBMCPassword,
		Logger: slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		f.Close()
		t.Fatalf("emulate.Start = %v", err)
	}
	t.Cleanup(func() { rack.Close(); f.Close() })
	return rack
}

// startPG starts (or starts again) the private PostgreSQL, durable as
// serve's own: Ephemeral's synchronous_commit=off would lose commits it had
// acknowledged to a kill -9, which no product survives.
func (e *chaosEnv) startPG(ctx context.Context) error {
	pg, err := pgcluster.StartConfig(ctx, pgcluster.Config{Dir: e.pgDir})
	if err != nil {
		return err
	}
	e.pgMu.Lock()
	e.pg = pg
	e.pgMu.Unlock()
	return nil
}

// faults are what the driver injects: kill -9 of each kind of process, and
// the two network faults.
func (e *chaosEnv) faults() []chaos.Fault {
	var out []chaos.Fault
	for _, name := range chaosProcs {
		out = append(out, chaos.Fault{Name: procKind(name),
			Inject:  func(*rand.Rand) (string, error) { e.c.procs[name].kill9(); return name, nil },
			Restart: func() error { return e.restartProc(name) }})
	}
	out = append(out,
		chaos.Fault{Name: "bcd-site", Inject: func(*rand.Rand) (string, error) { e.agent.kill9(); return "bcd site", nil },
			Restart: e.restartAgent},
		chaos.Fault{Name: "ramdisk", Inject: e.crashRamdisk, Restart: e.resetMachines},
		chaos.Fault{Name: "postgres", Inject: e.killPG, Restart: func() error { return e.startPG(context.Background()) }},
		chaos.Fault{Name: "net-drop", Network: true, Inject: func(rng *rand.Rand) (string, error) {
			refuse := time.Duration(200+rng.IntN(2000)) * time.Millisecond
			e.toCP.Drop(refuse)
			e.toT.Drop(refuse)
			return fmt.Sprintf("site↔control plane (refused %s)", refuse), nil
		}},
		chaos.Fault{Name: "net-delay", Network: true, Inject: func(rng *rand.Rand) (string, error) {
			d, window := time.Duration(20+rng.IntN(300))*time.Millisecond, time.Duration(1+rng.IntN(5))*time.Second
			e.toCP.Delay(d, window)
			e.toT.Delay(d, window)
			return fmt.Sprintf("site↔control plane (+%s a chunk for %s)", d, window), nil
		}},
	)
	return out
}

// procKind is the kind of a Procfile process: serve-api, serve-worker,
// temporal-<service>.
func procKind(name string) string {
	switch {
	case name == "api-1":
		return "serve-api"
	case name == "worker-1":
		return "serve-worker"
	case name == "temporal-worker":
		return name
	}
	return "temporal-" + strings.TrimSuffix(name, "-1")
}

// restartProc starts a killed Procfile process again and waits until it
// serves.
func (e *chaosEnv) restartProc(name string) error {
	p := e.c.procs[name]
	p.start(e.c.lines[name][1:]...)
	e.c.starts[name]++
	up := "control plane started"
	if i := slices.Index(e.c.lines[name], "--services"); i > 0 {
		up = "temporal " + e.c.lines[name][i+1] + " running"
	}
	return waitLogErr(p, up, e.c.starts[name], 2*time.Minute)
}

func (e *chaosEnv) restartAgent() error {
	n := countLines(e.t, e.agent.log, "site agent started")
	e.agent.start(e.agentArgs...) // no token: it joined already
	return waitLogErr(e.agent, "site agent started", n+1, 2*time.Minute)
}

// waitLogErr is proc.waitLog returning its failure (for the driver's goroutine).
func waitLogErr(p *proc, s string, n int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); countLines(p.t, p.log, s) < n; time.Sleep(100 * time.Millisecond) {
		if p.exited() {
			return fmt.Errorf("%s exited before logging %q:\n%s", p.name, s, tail(p.log, 20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not log %q within %s:\n%s", p.name, s, timeout, tail(p.log, 20))
		}
	}
	return nil
}

// crashRamdisk kills a running ramdisk, of a machine the seed picks among
// those running one; none running is a miss.
func (e *chaosEnv) crashRamdisk(rng *rand.Rand) (string, error) {
	ms := e.rack.Machines()
	first := rng.IntN(len(ms))
	for i := range ms {
		m := ms[(first+i)%len(ms)]
		ok, err := e.rack.CrashRamdisk(m.Name)
		if err != nil || ok {
			return "the ramdisk of " + m.Name, err
		}
	}
	return "", nil
}

// resetMachines resets every machine whose ramdisk was killed and that its
// BMC did not boot meanwhile.
func (e *chaosEnv) resetMachines() error {
	for _, m := range e.rack.Machines() {
		if _, err := e.rack.ResetMachine(m.Name); err != nil {
			return err
		}
	}
	return nil
}

// killPG kills -9 the postmaster (its backends end when they see it gone).
func (e *chaosEnv) killPG(*rand.Rand) (string, error) {
	pid := postmasterPID(e.t, e.pgDir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return "", err
	}
	if !waitGone(pid, 30*time.Second) {
		return "", fmt.Errorf("postgres (pid %d) still runs 30s after kill -9", pid)
	}
	return fmt.Sprintf("postgres (pid %d)", pid), nil
}

// ensureUp restarts whatever is down after the driver stopped (a restart
// that failed) so the checks can read the API and the database.
func (e *chaosEnv) ensureUp(t *testing.T) {
	for _, name := range chaosProcs {
		if e.c.procs[name].exited() {
			t.Logf("chaos: %s was down after the run; starting it", name)
			if err := e.restartProc(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if e.agent.exited() {
		if err := e.restartAgent(); err != nil {
			t.Fatal(err)
		}
	}
}

// lifecycleRun is what one machine's lifecycles did: its node, how many
// lifecycles finished, the verbs that took (by workflow type), and how it
// stopped early.
type lifecycleRun struct {
	machine string
	node    string
	done    int
	verbs   map[string]int
	err     error
}

// lifecycles takes machine m from enroll through loops lifecycles, and
// on while missed (the fault kinds the driver has not hit yet) names any,
// up to 5×loops: lifecycles that run faster than the driver's faults (the
// short run's 12 took 14 s, with 3 faults) would end before every kind had
// its turn.
func (e *chaosEnv) lifecycles(ctx context.Context, m emulate.MachineInfo, loops int, missed func() []string) (r lifecycleRun) {
	r = lifecycleRun{machine: m.Name, verbs: map[string]int{}}
	// A transition not done in bound is a stuck node. Faults can add up, legitimately, to
	// minutes: a ramdisk killed under boot.kexec is found gone after 90 s unheard, then
	// the machine is power-cycled, and a command whose completion a killed Temporal
	// service or a dropped link lost is retried after its heartbeat timeout (20 s for a
	// ramdisk or BMC command; a CI run's deploy took 4m12s when a BMC command's was its
	// 2-minute start-to-close).
	bound := 6 * time.Minute
	if r.node, r.err = e.enroll(ctx, m); r.err != nil {
		return r
	}
	r.verbs[wf.Enroll]++
	if r.err = waitState(ctx, e.api, r.node, "ready", bound); r.err != nil {
		return r
	}
	for i := 0; i < loops || (len(missed()) > 0 && i < 5*loops); i++ {
		if r.err = e.verb(ctx, r.node, "ready", func() error {
			_, err := e.api.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: r.node, Profile: crashProfile, ProfileVersion: 1}))
			return err
		}); r.err != nil {
			return r
		}
		r.verbs[wf.Deploy]++
		if r.err = waitState(ctx, e.api, r.node, "deployed", bound); r.err != nil {
			return r
		}
		if r.err = e.verb(ctx, r.node, "deployed", func() error {
			_, err := e.api.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: r.node, Wipe: "quick"}))
			return err
		}); r.err != nil {
			return r
		}
		r.verbs[wf.Undeploy]++
		if r.err = waitState(ctx, e.api, r.node, "ready", bound); r.err != nil {
			return r
		}
		r.done++
	}
	return r
}

// enroll enrolls m, retrying while the control plane is down; when an
// answer was lost and the node exists, it is found by its BMC address.
func (e *chaosEnv) enroll(ctx context.Context, m emulate.MachineInfo) (string, error) {
	var last error
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		r, err := e.api.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: e.fx.SiteID, PoolId: e.fx.PoolID,
			Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver,
				Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: crashBMCPassword}}}))
		if err == nil {
			return r.Msg.Node.Id, nil
		}
		last = err
		if id := e.nodeByBMC(ctx, m.BMCAddress); id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("enroll %s: %w", m.Name, last)
}

func (e *chaosEnv) nodeByBMC(ctx context.Context, bmc string) string {
	r, err := e.api.Metal.List(ctx, connect.NewRequest(&v1.ListNodesRequest{PoolId: e.fx.PoolID}))
	if err != nil {
		return ""
	}
	for _, n := range r.Msg.Items {
		if n.BmcAddress == bmc {
			return n.Id
		}
	}
	return ""
}

// verb calls a verb on a node in state from, retrying while the control
// plane is down. An error after which the node left from means the verb
// took and its answer was lost: not retried (that would be a second verb).
func (e *chaosEnv) verb(ctx context.Context, node, from string, call func() error) error {
	var last error
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		err := call()
		if err == nil {
			return nil
		}
		last = err
		if r, gerr := e.api.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: node})); gerr == nil && r.Msg.Node.State != from {
			return nil
		}
	}
	return fmt.Errorf("from %s: %w", from, last)
}

// check runs every invariant after the run.
func (e *chaosEnv) check(ctx context.Context, t *testing.T, runs []lifecycleRun) []chaos.Check {
	conn, err := pgx.Connect(ctx, e.pg.URL("better_compute"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	nodes := map[string]*v1.Node{}
	if r, err := e.api.Metal.List(ctx, connect.NewRequest(&v1.ListNodesRequest{PoolId: e.fx.PoolID})); err != nil {
		t.Fatal(err)
	} else {
		for _, n := range r.Msg.Items {
			nodes[n.Id] = n
		}
	}
	flows := map[string][]*v1.Workflow{}
	all := e.settledWorkflows(ctx, t)
	for _, w := range all {
		flows[w.NodeId] = append(flows[w.NodeId], w)
	}
	return []chaos.Check{
		{Name: "lifecycles finished", Violations: lifecycleViolations(runs)},
		{Name: "legal states", Violations: stateViolations(nodes, runs)},
		{Name: "no node stuck", Violations: stuckViolations(all)},
		{Name: "no workflow duplicated or lost", Violations: workflowViolations(runs, flows)},
		{Name: "one attested wipe before each ready", Violations: wipeViolations(ctx, conn, runs, flows)},
		{Name: "each command recorded once", Violations: commandViolations(ctx, conn, flows)},
		{Name: "each image fetched once from its source", Violations: imageViolations(e.img)},
		{Name: "database and Temporal consistent", Violations: consistencyViolations(nodes, all)},
	}
}

// settledWorkflows lists every workflow of the tenant, waiting up to a
// minute for running ones to finish (a run that was killed may still be
// winding down).
func (e *chaosEnv) settledWorkflows(ctx context.Context, t *testing.T) []*v1.Workflow {
	var items []*v1.Workflow
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		r, err := e.api.Workflows.List(ctx, connect.NewRequest(&v1.ListWorkflowsRequest{}))
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			continue
		}
		items = r.Msg.Items
		if !slices.ContainsFunc(items, func(w *v1.Workflow) bool { return w.Status == "running" }) || time.Now().After(deadline) {
			return items
		}
	}
}

func lifecycleViolations(runs []lifecycleRun) []string {
	var out []string
	for _, r := range runs {
		if r.err != nil {
			out = append(out, fmt.Sprintf("%s (node %s) stopped after %d lifecycles: %v", r.machine, r.node, r.done, r.err))
		}
	}
	return out
}

// stateViolations: every node is in a state of nodestate's table, and one
// whose lifecycles all finished is ready.
func stateViolations(nodes map[string]*v1.Node, runs []lifecycleRun) []string {
	var out []string
	for id, n := range nodes {
		if _, err := nodestate.Parse(n.State); err != nil {
			out = append(out, fmt.Sprintf("node %s is in %q: %v", id, n.State, err))
		}
	}
	for _, r := range runs {
		if n := nodes[r.node]; r.err == nil && (n == nil || n.State != "ready") {
			out = append(out, fmt.Sprintf("node %s of %s finished its lifecycles but is %v", r.node, r.machine, n.GetState()))
		}
	}
	return out
}

// stuckViolations: no workflow still runs a minute after the lifecycles
// ended (each waited at most its bound for progress), none failed or was
// terminated.
func stuckViolations(all []*v1.Workflow) []string {
	var out []string
	for _, w := range all {
		if w.Status != "completed" {
			out = append(out, fmt.Sprintf("%s %s of node %s is %s", w.Type, w.RunId, w.NodeId, w.Status))
		}
	}
	return out
}

// workflowViolations: per node, Temporal has one workflow of each type per
// verb the driver issued, no more (duplicated) and no fewer (lost).
func workflowViolations(runs []lifecycleRun, flows map[string][]*v1.Workflow) []string {
	var out []string
	for _, r := range runs {
		if r.node == "" {
			continue
		}
		got := map[string]int{}
		for _, w := range flows[r.node] {
			got[w.Type]++
		}
		if fmt.Sprint(got) != fmt.Sprint(r.verbs) {
			out = append(out, fmt.Sprintf("node %s: Temporal has %v, the driver issued %v", r.node, got, r.verbs))
		}
	}
	return out
}

// wipeViolations: each enroll and undeploy run that completed (each ends
// in ready) has exactly one attested wipe record, consumed by the move to
// ready; no other run has one.
func wipeViolations(ctx context.Context, conn *pgx.Conn, runs []lifecycleRun, flows map[string][]*v1.Workflow) []string {
	rows, err := conn.Query(ctx, `SELECT node_id, run_id, kind, used_at IS NOT NULL FROM wipe_records`)
	if err != nil {
		return []string{err.Error()}
	}
	type rec struct {
		kind string
		used bool
	}
	byRun := map[string][]rec{}
	for rows.Next() {
		var node, run string
		var r rec
		if err := rows.Scan(&node, &run, &r.kind, &r.used); err != nil {
			return []string{err.Error()}
		}
		byRun[run] = append(byRun[run], r)
	}
	if err := rows.Err(); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, r := range runs {
		for _, w := range flows[r.node] {
			recs := byRun[w.RunId]
			delete(byRun, w.RunId)
			endsReady := w.Type == wf.Enroll || w.Type == wf.Undeploy
			switch {
			case !endsReady && len(recs) > 0:
				out = append(out, fmt.Sprintf("%s %s has %d wipe records, want none", w.Type, w.RunId, len(recs)))
			case endsReady && w.Status == "completed" && (len(recs) != 1 || recs[0].kind != "attested" || !recs[0].used):
				out = append(out, fmt.Sprintf("%s %s of node %s has wipe records %v, want one attested and consumed by its ready", w.Type, w.RunId, r.node, recs))
			}
		}
	}
	for run, recs := range byRun {
		out = append(out, fmt.Sprintf("wipe records %v of run %s, which Temporal does not have", recs, run))
	}
	return out
}

// commandViolations: one row per workflow run and step (the table's key
// says so; counted anyway), every command of a completed run finished and
// succeeded with an attempt of at least 1, and every command's run is one
// Temporal has.
func commandViolations(ctx context.Context, conn *pgx.Conn, flows map[string][]*v1.Workflow) []string {
	status := map[string]string{}
	for _, ws := range flows {
		for _, w := range ws {
			status[w.RunId] = w.Status
		}
	}
	rows, err := conn.Query(ctx, `SELECT run_id, step, kind, attempt, status, error_kind, count(*) OVER (PARTITION BY workflow_id, run_id, step) FROM commands`)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var run, step, kind, st, errKind string
		var attempt int32
		var n int64
		if err := rows.Scan(&run, &step, &kind, &attempt, &st, &errKind, &n); err != nil {
			return []string{err.Error()}
		}
		ws, known := status[run]
		switch {
		case n != 1:
			out = append(out, fmt.Sprintf("run %s step %s recorded %d times", run, step, n))
		case !known:
			out = append(out, fmt.Sprintf("command %s %s of run %s, which Temporal does not have", step, kind, run))
		case ws == "completed" && st == "failed" && errKind == string(errs.BootStalled) && attempt >= 1:
			// its ramdisk stalled or restarted: the run booted it again and resent the command
		case ws == "completed" && (st != "succeeded" || attempt < 1):
			out = append(out, fmt.Sprintf("command %s %s of completed run %s is %s in attempt %d", step, kind, run, st, attempt))
		}
	}
	return append(out, errString(rows.Err())...)
}

func errString(err error) []string {
	if err == nil {
		return nil
	}
	return []string{err.Error()}
}

// imageViolations: the site cache fetched the image from its source once,
// however many deploys wrote it and however often bcd site died.
func imageViolations(img *imageSource) []string {
	if n := img.gets.Load(); n != 1 {
		return []string{fmt.Sprintf("GETs of the source image = %d, want 1", n)}
	}
	return nil
}

// consistencyViolations: every node in a state a workflow works in has a
// running workflow, and every running workflow names a node that exists.
func consistencyViolations(nodes map[string]*v1.Node, all []*v1.Workflow) []string {
	running := map[string]bool{}
	var out []string
	for _, w := range all {
		if w.Status != "running" {
			continue
		}
		running[w.NodeId] = true
		if nodes[w.NodeId] == nil {
			out = append(out, fmt.Sprintf("running %s %s names node %q, which does not exist", w.Type, w.WorkflowId, w.NodeId))
		}
	}
	for id, n := range nodes {
		if nodestate.State(n.State).Active() && !running[id] {
			out = append(out, fmt.Sprintf("node %s is %s with no running workflow", id, n.State))
		}
	}
	return out
}

// TestChaosChecksFail: each invariant the harness checks without the
// database says so when it does not hold (a duplicated and a lost
// workflow, a stuck one, an illegal or unfinished state, a second fetch of
// the image, a node working with no workflow and a workflow naming no node).
func TestChaosChecksFail(t *testing.T) {
	runs := []lifecycleRun{{machine: "emu-01", node: "n1", done: 1, verbs: map[string]int{wf.Enroll: 1, wf.Deploy: 1, wf.Undeploy: 1}},
		{machine: "emu-02", node: "n2", err: errors.New("node n2 is failed")}}
	flows := map[string][]*v1.Workflow{"n1": {
		{Type: wf.Enroll, RunId: "r1", NodeId: "n1", Status: "completed"},
		{Type: wf.Deploy, RunId: "r2", NodeId: "n1", Status: "completed"},
		{Type: wf.Deploy, RunId: "r3", NodeId: "n1", Status: "running"}, // a second deploy, and no undeploy
	}}
	nodes := map[string]*v1.Node{"n1": {Id: "n1", State: "deploying"}, "n3": {Id: "n3", State: "bogus"}}
	all := append(flows["n1"], &v1.Workflow{Type: wf.Deploy, RunId: "r4", WorkflowId: "metal/n9", NodeId: "n9", Status: "running"})
	img := &imageSource{}
	img.gets.Store(2)
	for name, got := range map[string][]string{
		"lifecycles finished":              lifecycleViolations(runs),
		"legal states":                     stateViolations(nodes, runs),
		"no node stuck":                    stuckViolations(all),
		"no workflow duplicated or lost":   workflowViolations(runs, flows),
		"each image fetched once":          imageViolations(img),
		"database and Temporal consistent": consistencyViolations(map[string]*v1.Node{"n1": {State: "releasing"}}, all[3:]),
	} {
		if len(got) == 0 {
			t.Errorf("%s: no violation found, want one", name)
		}
		t.Logf("%s: %q", name, got)
	}
	if got := workflowViolations(runs[:1], map[string][]*v1.Workflow{"n1": flows["n1"][:2]}); len(got) == 0 {
		t.Errorf("a lost undeploy: no violation found, want one")
	}
}

// explain logs, for each machine whose lifecycles stopped early, where its
// node's last workflow is as Temporal has it: its status, its pending
// activities (attempts, last failure) or the failure that ended it.
func (e *chaosEnv) explain(ctx context.Context, t *testing.T, runs []lifecycleRun) {
	c, err := client.Dial(client.Options{HostPort: e.c.addr("FRONTEND_1_PORT"), Namespace: controlplane.DefaultNamespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Logf("chaos: no Temporal client to explain the violations: %v", err)
		return
	}
	defer c.Close()
	for _, r := range runs {
		if r.err == nil || r.node == "" {
			continue
		}
		wid := "metal/" + r.node
		d, err := c.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			t.Logf("chaos: %s: describe %s: %v", r.machine, wid, err)
			continue
		}
		info := d.WorkflowExecutionInfo
		t.Logf("chaos: %s: %s %s is %s", r.machine, info.GetType().GetName(), info.GetExecution().GetRunId(), info.GetStatus())
		for _, p := range d.PendingActivities {
			t.Logf("chaos:   pending %s (%s) attempt %d state %s, last failure: %s", p.ActivityId, p.ActivityType.GetName(),
				p.Attempt, p.State, p.LastFailure.GetMessage())
		}
		it := c.GetWorkflowHistory(ctx, wid, info.GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				break
			}
			if f := ev.GetActivityTaskFailedEventAttributes().GetFailure(); f != nil {
				t.Logf("chaos:   event %d activity failed: %s", ev.EventId, f.GetMessage())
			}
			if a := ev.GetWorkflowExecutionFailedEventAttributes(); a != nil {
				t.Logf("chaos:   event %d workflow failed: %s (cause: %s)", ev.EventId, a.GetFailure().GetMessage(), a.GetFailure().GetCause().GetMessage())
			}
		}
	}
}
