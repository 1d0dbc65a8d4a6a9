//go:build fakehw

package demo_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bench/procmem"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/nodeagent"
	"github.com/better-compute/better-compute/siteagent"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

// benchCluster is Fleet/cluster/N=n: the loop of Fleet/N=n (the same
// image, profile, verbs and activity sequence, checked from the histories)
// through the control plane on a Temporal cluster, as deploy/cluster/Procfile
// runs it and TestTemporalCluster starts it (startCluster): Temporal's
// frontend, history and matching services twice each and its worker service
// once, on PostgreSQL persistence and visibility with 4 history shards, and
// two `serve --only api` and two `serve --only worker` beside them, every one
// a process of its own logging at warn. The site agent, the emulated rack
// and the image server run in this process, as the demo runs them. Node i's
// verbs go to api-(i%2+1).
//
// Metrics: those of ours (cpu-s/loop here counts every process: the
// cluster's, PostgreSQL's and this one), cluster/ours (time per loop on the
// cluster over the embedded default's in the same run: 1.00 is as fast),
// cpu-cluster/ours (CPU seconds a loop over the embedded default's, its
// Postgres's included: on a shared machine, steadier than the time),
// cpu-s-<kind>/loop (each kind of process's CPU seconds a loop: frontend,
// history, matching, tworker for Temporal's worker service, api and worker
// for serve's, pg, and bench for this process) and pg-xacts/loop
// (PostgreSQL transactions, every database).
func (f *fleet) benchCluster(b *testing.B) {
	if f.ours.loopsPerSec == 0 {
		b.Fatalf("Fleet/cluster/N=%d compares with Fleet/N=%d: run both (-bench 'Fleet/(cluster/)?N=%d$')", f.n, f.n, f.n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+f.timeout())
	defer cancel()
	cf := startClusterFleet(ctx, b, f.n)
	tg := cf.tg
	loopFleet(ctx, b, tg, cf.nodes) // warm-up, as ours
	meter := newClusterMeter(ctx, b, cf.c)
	var runs []runRef
	for b.Loop() {
		runs = append(runs, loopFleet(ctx, b, tg, cf.nodes)...)
	}
	elapsed := b.Elapsed()
	cpu, xacts := meter.read(ctx, b)
	st := readRuns(b, tg.temporal, runs, wf.ControlPlaneQueue, f.ours.flows)
	var total time.Duration
	for _, d := range cpu {
		total += d
	}
	res := reportFleet(b, "", st, elapsed, total)
	b.ReportMetric(f.ours.loopsPerSec/res.loopsPerSec, "cluster/ours")
	b.ReportMetric(res.cpuPerLoop/(f.ours.cpuPerLoop+f.ours.pgCPUPerLoop), "cpu-cluster/ours")
	for kind, d := range cpu {
		b.ReportMetric(d.Seconds()/float64(st.loops), "cpu-s-"+kind+"/loop")
	}
	b.ReportMetric(float64(xacts)/float64(st.loops), "pg-xacts/loop")
}

// clusterFleet is n emulated machines enrolled through the control plane on
// the cluster.
type clusterFleet struct {
	c     *clusterRun
	tg    fleetTarget
	nodes []string
}

// startClusterFleet starts the cluster (startCluster), registers the site,
// image and profile, starts the site agent, the rack of n machines and the
// image server in this process, and enrolls every machine.
func startClusterFleet(ctx context.Context, t testing.TB, n int) *clusterFleet {
	dir := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	c := startCluster(ctx, t, binary(t, "better-compute"), dir, "warn")
	apis := []*demo.Client{c.api(t, "api-1"), c.api(t, "api-2")}

	img, err := demo.NewImageServer(8 << 20) // as Fleet/N=n's demo
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(img.Close)
	fx := registerSite(ctx, t, apis[0], dir, &imageSource{URL: img.URL, Digest: img.Digest, Size: img.Size, Raw: img.Raw})
	caFile := filepath.Join(c.dataDir, "pki", "ca.crt")
	agent, err := siteagent.Start(ctx, siteagent.Config{ControlPlaneURL: "https://" + c.addr("AGENTS_1_PORT"), CAFile: caFile,
		TokenFile: fx.TokenFile, DataDir: filepath.Join(dir, "site-agent"), BootListen: "127.0.0.1:0", RelayListen: "127.0.0.1:0",
		Drivers: demo.Drivers(), Logger: quiet})
	if err != nil {
		t.Fatalf("siteagent.Start = %v", err)
	}
	t.Cleanup(agent.Stop)
	rack, err := emulate.Start(ctx, emulate.Config{Machines: n, Dir: filepath.Join(dir, "rack"), BootURL: agent.BootURL(),
		Username: "admin", Password: crashBMCPassword, Logger: quiet,
		NodeAgent: func(ctx context.Context, n emulate.InstalledNode) error { // as the demo's rack: bcd node joins through the relay
			return nodeagent.Run(ctx, nodeagent.Config{SiteURL: agent.RelayURL(), CAFile: caFile,
				TokenFile: n.JoinTokenPath(), DataDir: n.NodeDataDir(), Logger: quiet})
		}})
	if err != nil {
		t.Fatalf("emulate.Start = %v", err)
	}
	t.Cleanup(rack.Close)
	tg := fleetTarget{apis: apis, temporal: clusterClient(ctx, t, c), profile: crashProfile}
	return &clusterFleet{c: c, tg: tg, nodes: enrollCluster(ctx, t, tg, fx, rack.Machines())}
}

// clusterClient is a Temporal client of the cluster's first frontend with
// the control plane's payload codec: its keys from the control plane's
// database, unwrapped with its key file.
func clusterClient(ctx context.Context, b testing.TB, c *clusterRun) client.Client {
	s, err := store.Open(ctx, c.pg.URL("better_compute"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	kek, err := codec.LoadOrCreateKey(filepath.Join(c.dataDir, "master.key")) // api-1 made it
	if err != nil {
		b.Fatal(err)
	}
	if err := s.UseKeyEncryptionKey(ctx, kek); err != nil {
		b.Fatal(err)
	}
	ring, err := codec.NewKeyring(storeKeys{s})
	if err != nil {
		b.Fatal(err)
	}
	dc := ring.DataConverter("")
	tc, err := client.DialContext(ctx, client.Options{HostPort: c.addr("FRONTEND_1_PORT"), Namespace: controlplane.DefaultNamespace,
		DataConverter: dc, FailureConverter: codec.NewFailureConverter(dc), Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		b.Fatalf("dial the cluster's frontend: %v", err)
	}
	b.Cleanup(tc.Close)
	return tc
}

// storeKeys is the control plane's codec keys in its store (a codec.Source).
type storeKeys struct{ s *store.Store }

func (k storeKeys) CurrentKey(ctx context.Context, tenant string) (codec.Key, error) {
	dk, err := k.s.CurrentKey(ctx, store.PurposeCodec, tenant)
	return codec.Key{ID: dk.ID, Tenant: dk.TenantID, Key: dk.Key}, err
}

func (k storeKeys) KeyByID(ctx context.Context, id string) (codec.Key, error) {
	dk, err := k.s.Key(ctx, store.PurposeCodec, id)
	return codec.Key{ID: dk.ID, Tenant: dk.TenantID, Key: dk.Key}, err
}

// enrollCluster enrolls every machine at once (demo.MaxInFlight at a time,
// as enrollFleet) and waits for each enroll's workflow to end with the node
// ready.
func enrollCluster(ctx context.Context, b testing.TB, tg fleetTarget, fx siteFixture, machines []emulate.MachineInfo) []string {
	nodes := make([]string, len(machines))
	fails := make([]error, len(machines))
	var wg sync.WaitGroup
	slots := make(chan struct{}, demo.MaxInFlight)
	for i, m := range machines {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			r, err := tg.apis[i%len(tg.apis)].Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: fx.SiteID, PoolId: fx.PoolID,
				Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver,
					Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: crashBMCPassword}}}))
			if err != nil {
				fails[i] = fmt.Errorf("metal.enroll(%s): %w", m.Name, err)
				return
			}
			var res wf.Result
			if err := tg.temporal.GetWorkflow(ctx, r.Msg.WorkflowId, r.Msg.RunId).Get(ctx, &res); err != nil {
				fails[i] = fmt.Errorf("enroll of %s: %w", m.Name, err)
			} else if res.State != "ready" {
				fails[i] = fmt.Errorf("enroll of %s ended with the node %s, want ready", m.Name, res.State)
			}
			nodes[i] = r.Msg.Node.Id
		})
	}
	wg.Wait()
	for _, err := range fails {
		if err != nil {
			b.Fatalf("enroll: %v", err)
		}
	}
	return nodes
}

// clusterMeter reads the CPU time of every process of the cluster by kind,
// and PostgreSQL's transactions, since it was made.
type clusterMeter struct {
	c      *clusterRun
	pgRoot int
	cpu0   map[string]time.Duration
	xacts0 int64
}

func newClusterMeter(ctx context.Context, b testing.TB, c *clusterRun) *clusterMeter {
	pgRoot, err := procmem.PidFile(filepath.Join(c.dir, "pg", "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	m := &clusterMeter{c: c, pgRoot: pgRoot}
	m.cpu0, m.xacts0 = m.cpu(b), m.xacts(ctx, b)
	return m
}

// read is each kind's CPU time and the transactions since the meter was made.
func (m *clusterMeter) read(ctx context.Context, b testing.TB) (map[string]time.Duration, int64) {
	cpu := m.cpu(b)
	for kind := range cpu {
		cpu[kind] -= m.cpu0[kind]
	}
	return cpu, m.xacts(ctx, b) - m.xacts0
}

func (m *clusterMeter) cpu(b testing.TB) map[string]time.Duration {
	out := map[string]time.Duration{"bench": processCPU(b), "pg": treeCPU(b, m.pgRoot)}
	for name, p := range m.c.procs {
		if p.exited() {
			b.Fatalf("%s exited during the benchmark:\n%s", name, tail(p.log, 20))
		}
		out[clusterKind(name)] += treeCPU(b, p.pid())
	}
	return out
}

// clusterKind is a Procfile process's kind: frontend-1 → frontend,
// temporal-worker → tworker, api-2 → api.
func clusterKind(name string) string {
	if name == "temporal-worker" {
		return "tworker"
	}
	kind, _, _ := strings.Cut(name, "-")
	return kind
}

// xacts is PostgreSQL's committed and rolled-back transactions so far, over
// every database (statistics lag a transaction by up to a second).
func (m *clusterMeter) xacts(ctx context.Context, b testing.TB) int64 {
	conn, err := pgx.Connect(ctx, m.c.pg.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT COALESCE(sum(xact_commit + xact_rollback), 0)::bigint FROM pg_stat_database`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// TestFleetCluster is the CI proof of BenchmarkFleet/cluster/N=n beyond what
// TestTemporalCluster shows of the same cluster: one machine enrolled
// through the bench's path (startClusterFleet), one loop (deploy and
// undeploy) waited for through its Temporal client with the control
// plane's codec (clusterClient), the loop's histories read and its flow
// taken apart as the benchmark does (readRuns), and the meter seeing the
// CPU of each busy kind of process and PostgreSQL's transactions.
func TestFleetCluster(t *testing.T) {
	ctx := ctxFor(t, 5*time.Minute)
	cf := startClusterFleet(ctx, t, 1)
	meter := newClusterMeter(ctx, t, cf.c)
	runs := loopFleet(ctx, t, cf.tg, cf.nodes)
	time.Sleep(time.Second) // PostgreSQL's statistics lag a transaction by up to a second
	cpu, xacts := meter.read(ctx, t)
	st := readRuns(t, cf.tg.temporal, runs, wf.ControlPlaneQueue, nil)
	if st.loops != 1 || len(st.flows) != 2 || st.activities == 0 || st.time.Wall <= 0 {
		t.Errorf("the loop's histories show %d loops, %d workflows, %d activities, %s; want 1 loop of 2 workflows (deploy, undeploy) with activities",
			st.loops, len(st.flows), st.activities, st.time.Wall)
	}
	for _, kind := range []string{"frontend", "history", "matching", "worker", "pg", "bench"} {
		if cpu[kind] <= 0 {
			t.Errorf("the meter saw %s spend no CPU in a loop (%v)", kind, cpu)
		}
	}
	if xacts <= 0 {
		t.Errorf("the meter saw %d PostgreSQL transactions in a loop, want some", xacts)
	}
}
