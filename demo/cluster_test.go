//go:build fakehw

package demo_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/store/pgcluster"
	wf "github.com/better-compute/better-compute/workflows"
)

// clusterProcfile is the documented multi-process example the test runs.
const clusterProcfile = "../deploy/cluster/Procfile"

// clusterKills are the processes killed -9 in each deploy of the test: one
// of each kind, both frontends in turn (the site agent balances over the
// frontends its join gave; frontend-1 goes first, the one that agents from
// before that dialled alone). The site agent joined through api-1, so that
// one stays.
var clusterKills = [][]string{
	{"frontend-1", "history-1", "matching-1", "temporal-worker", "api-2", "worker-1"},
	{"frontend-2", "history-2", "matching-2", "temporal-worker", "api-2", "worker-2"},
	{"frontend-1", "history-1", "matching-2", "temporal-worker", "api-2", "worker-1"},
}

// TestTemporalCluster runs deploy/cluster/Procfile as real processes on
// loopback: Temporal's frontend, history and matching services twice each
// and its worker service once, on a private PostgreSQL, and beside them two
// `serve --only api` and two `serve --only worker` dialling both frontends.
// It sets the schema up with `temporal setup-schema` (and sees another
// shard count refused), takes an emulated machine enroll → ready → deploy
// → deployed → undeploy → ready through the API, and just after the
// deploy starts kills -9 one process of each kind; the deploy and the
// undeploy still finish, each in one workflow run. BC_CLUSTER=full (task
// cluster) restarts what it killed and does it three times, with the other
// process of each pair.
func TestTemporalCluster(t *testing.T) {
	rounds := 1
	if os.Getenv("BC_CLUSTER") == "full" {
		rounds = len(clusterKills)
	}
	began := time.Now()
	bc := binary(t, "better-compute")
	dir := t.TempDir()
	ctx := ctxFor(t, time.Duration(3+3*rounds)*time.Minute)
	c := startCluster(ctx, t, bc, dir, "debug")
	t.Logf("cluster up (%d processes) after %s", len(c.procs), time.Since(began).Round(100*time.Millisecond))

	img := newImageSource(t, dir, 64<<20) // deploy.image takes a moment
	api := c.api(t, "api-2")
	fx := registerSite(ctx, t, api, dir, img)
	agent := startAgent(ctx, t, "https://"+c.addr("AGENTS_1_PORT"), filepath.Join(c.dataDir, "pki", "ca.crt"), fx.TokenFile, dir, filepath.Join(dir, "site-agent.log"))
	rack, _ := startRack(ctx, t, dir, agent.BootURL())
	m := rack.Machines()[0]
	id := enrollReady(ctx, t, api, fx, m)
	t.Logf("%s ready as %s after %s", m.Name, id, time.Since(began).Round(100*time.Millisecond))

	for r := range rounds {
		if r > 0 {
			c.restart(t, clusterKills[r-1])
			api = c.api(t, "api-2")
		}
		if _, err := api.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: crashProfile, ProfileVersion: 1})); err != nil {
			t.Fatalf("round %d: metal.deploy = %v", r, err)
		}
		last := waitInFlight(ctx, t, api, id)
		killed := time.Now()
		for _, name := range clusterKills[r] {
			c.procs[name].kill9()
		}
		t.Logf("round %d: killed -9 %s while the node was deploying, %s", r, strings.Join(clusterKills[r], ", "), last)
		api = c.api(t, "api-1") // the load balancer's turn: api-2 is gone
		if err := waitState(ctx, api, id, "deployed", 3*time.Minute); err != nil {
			t.Fatalf("round %d: %v\n%s", r, err, c.tails())
		}
		t.Logf("round %d: deployed %s after the kill", r, time.Since(killed).Round(100*time.Millisecond))
		if _, err := api.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: id, Wipe: "quick"})); err != nil {
			t.Fatalf("round %d: metal.undeploy = %v", r, err)
		}
		if err := waitState(ctx, api, id, "ready", 3*time.Minute); err != nil {
			t.Fatalf("round %d: %v\n%s", r, err, c.tails())
		}
		t.Logf("round %d: ready again %s after the kill", r, time.Since(killed).Round(100*time.Millisecond))
	}
	checkOneRunEach(t, api, id, rounds)
	for name, p := range c.procs {
		if p.exited() && !slices.Contains(clusterKills[rounds-1], name) {
			t.Errorf("%s exited, want it running:\n%s", name, tail(p.log, 20))
		}
	}
	t.Logf("test took %s", time.Since(began).Round(100*time.Millisecond))
}

// clusterRun is the Procfile's processes, running.
type clusterRun struct {
	bc, dir, dataDir string
	pg               *pgcluster.Cluster // startCluster's (the chaos run keeps its own)
	vars             map[string]string
	lines            map[string][]string // name → argv (the binary first)
	procs            map[string]*proc
	starts           map[string]int // starts of each process so far
}

// startCluster starts a private PostgreSQL, sets up Temporal's schema, and
// starts every process of the Procfile, each logging at logLevel: Temporal's
// first, then api-1 (it makes the root token and keys), then the rest.
// TestTemporalCluster and BenchmarkFleet's cluster/N=n run it.
func startCluster(ctx context.Context, t testing.TB, bc, dir, logLevel string) *clusterRun {
	t.Helper()
	pg, err := pgcluster.StartConfig(ctx, pgcluster.Config{Dir: filepath.Join(dir, "pg"), Ephemeral: true})
	if err != nil {
		t.Fatalf("pgcluster.Start = %v", err)
	}
	t.Cleanup(func() { pg.Stop() }) // last: after every process
	if err := pg.CreateDatabase(ctx, "better_compute"); err != nil {
		t.Fatal(err)
	}
	c := &clusterRun{bc: bc, dir: dir, dataDir: filepath.Join(dir, "cp"), pg: pg, procs: map[string]*proc{}, starts: map[string]int{}}
	c.vars = clusterVars(t, bc, c.dataDir, pg)
	for _, k := range []string{"TEMPORAL_ARGS", "SERVE_ARGS"} {
		c.vars[k] = strings.Replace(c.vars[k], "--log-level debug", "--log-level "+logLevel, 1)
	}
	c.lines = readProcfile(t, clusterProcfile, c.vars)
	c.setup(t)
	temporal := []string{"frontend-1", "frontend-2", "history-1", "history-2", "matching-1", "matching-2", "temporal-worker"}
	for _, name := range temporal {
		c.start(t, name)
	}
	for _, name := range temporal {
		c.waitUp(t, name)
	}
	c.start(t, "api-1")
	c.api(t, "api-1")
	for _, name := range []string{"api-2", "worker-1", "worker-2"} {
		c.start(t, name)
	}
	for _, name := range []string{"worker-1", "worker-2"} {
		c.waitUp(t, name)
	}
	return c
}

// clusterVars are the Procfile's variables, as run.sh sets them, on free
// loopback ports; small connection pools (the private PostgreSQL takes 100).
func clusterVars(t testing.TB, bc, dataDir string, pg *pgcluster.Cluster) map[string]string {
	names := []string{"FRONTEND_1", "FRONTEND_2", "HISTORY_1", "HISTORY_2", "MATCHING_1", "MATCHING_2", "WORKER"}
	ports := freePorts(t, len(names)+4)
	members := membershipPorts(t, len(names))
	v := map[string]string{"BC": bc, "HOST": "127.0.0.1", "DATA_DIR": dataDir,
		"API_1_PORT": itoa(ports[0]), "AGENTS_1_PORT": itoa(ports[1]), "API_2_PORT": itoa(ports[2]), "AGENTS_2_PORT": itoa(ports[3])}
	for i, n := range names {
		v[n+"_PORT"], v[n+"_MEMBERSHIP_PORT"] = itoa(ports[4+i]), itoa(members[i])
	}
	v["TEMPORAL_ARGS"] = "--database-url " + pg.URL("temporal") + " --history-shards 4 --database-max-conns 6" +
		" --frontend-address 127.0.0.1:" + v["FRONTEND_1_PORT"] + " --log-level debug"
	v["SERVE_ARGS"] = "--data-dir " + dataDir + " --database-url " + pg.URL("better_compute") +
		" --temporal-address 127.0.0.1:" + v["FRONTEND_1_PORT"] + ",127.0.0.1:" + v["FRONTEND_2_PORT"] +
		" --ui-listen off --metrics-listen off --log-level debug"
	return v
}

func itoa(n int) string { return strconv.Itoa(n) }

// membershipPorts returns n loopback ports below 32768 that were free a
// moment ago: Temporal's PostgreSQL schema keeps membership ports in a
// smallint, and the kernel's ephemeral ports are above it.
func membershipPorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for p := 20000 + rand.IntN(10000); len(ports) < n && p < 32768; p++ {
		ln, err := net.Listen("tcp", addr(p))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("found %d free ports below 32768, want %d", len(ports), n)
	}
	return ports
}

// readProcfile reads the name: command lines of path with vars expanded
// (as run.sh's bash does, no quoting) and split into words.
func readProcfile(t testing.TB, path string, vars map[string]string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, cmd, ok := strings.Cut(sc.Text(), ": ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		lines[name] = strings.Fields(os.Expand(cmd, mapping(t, vars)))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func mapping(t testing.TB, vars map[string]string) func(string) string {
	return func(k string) string {
		v, ok := vars[k]
		if !ok {
			t.Fatalf("the Procfile uses $%s, which the test does not set", k)
		}
		return v
	}
}

// setup runs run.sh's first steps: the schema (twice: it is idempotent),
// a refused change of the shard count, and the CA.
func (c *clusterRun) setup(t testing.TB) {
	t.Helper()
	args := append([]string{"temporal", "setup-schema"}, strings.Fields(c.vars["TEMPORAL_ARGS"])...)
	for range 2 {
		if out, err := exec.Command(c.bc, args...).CombinedOutput(); err != nil {
			t.Fatalf("better-compute temporal setup-schema = %v\n%s", err, out)
		}
	}
	out, err := exec.Command(c.bc, append(args, "--history-shards", "8")...).CombinedOutput()
	if want := "holds 4 history shards"; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("setup-schema --history-shards 8 on a 4-shard database = %v\n%s\nwant a failure saying %q", err, out, want)
	}
	if out, err := exec.Command(c.bc, "pki", "init", "--trust-domain", "t.test", "--data-dir", c.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("better-compute pki init = %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(c.dataDir, "config.yaml"), []byte(crashHardware), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (c *clusterRun) start(t testing.TB, name string) {
	t.Helper()
	argv, ok := c.lines[name]
	if !ok {
		t.Fatalf("the Procfile has no %s", name)
	}
	c.procs[name] = startProc(t, name, argv[0], filepath.Join(c.dir, name+".log"), argv[1:]...)
	c.starts[name]++
}

// waitUp waits for the line of the latest start of process name that says
// it serves: the banner of serve, "temporal <services> running" of the
// Temporal services.
func (c *clusterRun) waitUp(t testing.TB, name string) {
	t.Helper()
	argv := c.lines[name]
	up := "control plane started"
	if i := slices.Index(argv, "--services"); i > 0 {
		up = "temporal " + argv[i+1] + " running"
	}
	c.procs[name].waitLog(up, c.starts[name], 90*time.Second)
}

// restart starts the killed processes again and waits for them.
func (c *clusterRun) restart(t *testing.T, names []string) {
	t.Helper()
	for _, name := range names {
		c.procs[name].start(c.lines[name][1:]...)
		c.starts[name]++
	}
	for _, name := range names {
		c.waitUp(t, name)
	}
}

func (c *clusterRun) addr(port string) string { return "127.0.0.1:" + c.vars[port] }

// api waits for the API process name and returns a client of it.
func (c *clusterRun) api(t testing.TB, name string) *demo.Client {
	port := "API_1_PORT"
	if name == "api-2" {
		port = "API_2_PORT"
	}
	return waitAPI(context.Background(), t, c.procs[name], "http://"+c.addr(port), filepath.Join(c.dataDir, "root-token"))
}

// tails are the last lines of every process's log, for a failure.
func (c *clusterRun) tails() string {
	var b strings.Builder
	for name, p := range c.procs {
		fmt.Fprintf(&b, "---- %s:\n%s\n", name, tail(p.log, 15))
	}
	return b.String()
}

// waitInFlight waits until the node is deploying with a command of the
// deploy sent and not yet answered: the moment to kill.
func waitInFlight(ctx context.Context, t *testing.T, api *demo.Client, id string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n, err := api.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: id}))
		if err != nil {
			t.Fatal(err)
		}
		if n.Msg.Node.State == "deployed" {
			t.Fatalf("the deploy finished before a command of it was seen in flight")
		}
		cmds, err := commandsOf(ctx, api, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(cmds) == 0 || n.Msg.Node.State != "deploying" {
			continue
		}
		if c := cmds[len(cmds)-1]; c.Status == "sent" {
			return fmt.Sprintf("%s %s", c.Step, c.Status)
		}
	}
	t.Fatalf("no command of the deploy was in flight within a minute")
	return ""
}

// checkOneRunEach: the node has one enroll, and one deploy and one
// undeploy run a round, every one completed: nothing ran twice or failed
// while processes died.
func checkOneRunEach(t *testing.T, api *demo.Client, id string, rounds int) {
	t.Helper()
	want := map[string]int{wf.Enroll: 1, wf.Deploy: rounds, wf.Undeploy: rounds}
	var got map[string]int
	var other []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, err := api.Workflows.List(context.Background(), connect.NewRequest(&v1.ListWorkflowsRequest{NodeId: id}))
		if err != nil {
			t.Fatal(err)
		}
		got, other = map[string]int{}, nil
		for _, w := range r.Msg.Items {
			if w.Status == "completed" {
				got[w.Type]++
			} else {
				other = append(other, fmt.Sprintf("%s %s %s", w.Type, w.RunId, w.Status))
			}
		}
		if (len(other) == 0 && fmt.Sprint(got) == fmt.Sprint(want)) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(other) > 0 {
		t.Errorf("the node's completed workflows = %v and others %v, want %v and none", got, other, want)
	}
}
