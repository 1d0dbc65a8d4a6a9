//go:build fakehw

package demo_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/better-compute/better-compute/api"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bench/bare"
	"github.com/better-compute/better-compute/bench/procmem"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/internal/tracing/tracingtest"
	"github.com/better-compute/better-compute/internal/wfresult"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

var fleetFlag = flag.String("fleet", "1,5,20", "BenchmarkFleet: the fleet sizes to run, comma-separated")

var fleetCluster = flag.String("fleet-cluster", "", "BenchmarkFleet: the fleet sizes (each one of -fleet's) to run on a Temporal cluster too, comma-separated")

var fleetTrace = flag.Bool("fleet-trace", false, "BenchmarkFleet: trace every process, exported over OTLP/HTTP to an in-process receiver")

// fleetMinLoops: at N=1 one run's three pairs of loops gave ratios from
// 1.02 to 1.69, runs of ten loops 1.11 to 1.32, runs of fifty 1.15 to 1.25.
var fleetMinLoops = flag.Int("fleet-min-loops", 50, "BenchmarkFleet: machine loops each side runs at least at each size (pairs of loops beyond -benchtime's at the small sizes)")

var fleetProfile = flag.String("fleet-cpuprofile", "", "BenchmarkFleet: write a CPU profile of each timed loop to DIR/<ours|bare>-N=<n>.<loop>.pprof")

// BenchmarkFleet takes N emulated machines through one loop at once on the
// embedded default (control plane, embedded Temporal on SQLite, Postgres,
// site agent, and the emulated rack in its own process, as `better-compute
// demo --rack-process` runs them), then
// runs bare Temporal on the same server (package bench/bare):
//
//	Fleet/N=n       ours and bare, one loop of each in turn (which goes
//	                first alternating), timed apart (benchPair).
//	                Ours: every machine deploy → deployed → undeploy →
//	                ready at once (metal.deploy then metal.undeploy, wipe
//	                quick), through the API. Each machine is enrolled
//	                once, and goes through one warm-up loop, before the
//	                timer starts: a loop is deploy+undeploy.
//	                Bare: n machines at once, each running one bare
//	                workflow per workflow of our loop, on the same
//	                embedded server, namespace and mTLS identities (the
//	                control plane's client, a site's through the
//	                authorizer), with the codec, our search attributes and
//	                the same sequence of local, control-plane-queue and
//	                site-queue activities with the options ours had, read
//	                from our warm-up loop's history; every activity is a
//	                no-op without a heartbeat (ours send none in a
//	                loop at one machine: their commands end long before
//	                the site's first). Ours's timed loops and bare's must
//	                show the same steps and options as that warm-up.
//	Fleet/cluster/N=n  with -fleet-cluster naming n: ours's loop through
//	                the control plane on a Temporal cluster on PostgreSQL,
//	                deploy/cluster/Procfile's processes (benchCluster), after
//	                the embedded demo has stopped; cluster/ours is its time
//	                per loop over ours's.
//
// Metrics, ours's and, named with a bare- prefix, bare's: loops/s (machine
// loops per second of the side's own timed loops), acts/s (activities,
// local and regular, per second), acts/loop and local/loop, s-wall/loop (a
// machine's loop from its workflows' start to close, from history), and
// where that went (bare.Timing): s-in-acts/loop (regular activities
// running: the site, ramdisk and control-plane work), s-act-wait/loop
// (regular activities waiting for a worker), s-in-tasks/loop (workflow
// tasks running: workflow code and local activities), s-task-wait/loop
// (workflow tasks waiting for a worker) and of it s-first-wait/loop (each
// workflow's first task, which waits for any poller of the task queue);
// cpu-s/loop (this process's CPU seconds a loop of the side's own); ours
// only: MiB-peak-RSS (VmHWM of this test process, reset before each of
// ours's loops: the control plane, embedded Temporal and site agent),
// MiB-pg-peak-RSS and MiB-rack-peak-RSS
// (Postgres's tree and the emulated rack's process, which runs the
// machines' BMCs and ramdisks, sampled every second, shared pages counted
// once), cpu-s-pg/loop and cpu-s-rack/loop (Postgres's, the rack's);
// ours/bare (time per loop, ours over bare: the timed loops' sums), the
// ratio of each pair of loops (ours's i over bare's i) as ours/bare-min,
// -median and -max, cpu-ours/bare (this process's CPU a loop), and
// cpu-all-ours/bare (with Postgres's and the rack's, which in bare's loops
// are bare-cpu-s-others/loop).
// bench/fleet.sh prints a table.
func BenchmarkFleet(b *testing.B) {
	// The emulated ramdisk logs each wipe and image write through the
	// default logger; the benchmark lines must stay whole.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(prev) })
	sizes := fleetSizes(b)
	clustered := clusterSizes(b, sizes)
	for _, n := range sizes {
		f := &fleet{n: n, dir: b.TempDir()} // the parent's: a sub-benchmark's goes when it ends
		b.Run(fmt.Sprintf("N=%d", n), f.benchPair)
		f.stop()
		if clustered[n] {
			b.Run(fmt.Sprintf("cluster/N=%d", n), f.benchCluster)
		}
	}
}

// fleet is one fleet size: the demo that ours starts and bare runs beside,
// on its Temporal server, and what ours measured.
type fleet struct {
	n    int
	dir  string
	demo *demo.Demo
	ours fleetResult
}

// timeout bounds a sub-benchmark: 20 minutes, and 4 s a machine beyond 200.
func (f *fleet) timeout() time.Duration {
	return 20*time.Minute + time.Duration(max(0, f.n-200))*4*time.Second
}

func (f *fleet) stop() {
	if f.demo != nil {
		f.demo.Stop()
	}
}

// fleetTracer is nil (tracing off) unless -fleet-trace: then every span
// goes through tracing.Start's batching OTLP/HTTP exporter to a receiver in
// this process that decodes it, as a collector would.
func fleetTracer(b *testing.B) trace.TracerProvider {
	if !*fleetTrace {
		return nil
	}
	rcv := tracingtest.Start()
	tp, shutdown, err := tracing.Start(context.Background(), tracing.Config{Endpoint: rcv.URL() + "/v1/traces", Service: "fleet"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = shutdown(context.Background())
		b.Logf("tracing on: %d spans received", len(rcv.Spans()))
		rcv.Close()
	})
	return tp
}

func fleetSizes(b *testing.B) []int { return parseSizes(b, "fleet", *fleetFlag) }

func parseSizes(b *testing.B, name, list string) []int {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-%s %q: %q is not a fleet size", name, list, f)
		}
		ns = append(ns, n)
	}
	return ns
}

// clusterSizes are the sizes of -fleet-cluster, each one of sizes: the
// cluster's figures are against the embedded default's of the same run.
func clusterSizes(b *testing.B, sizes []int) map[int]bool {
	out := map[int]bool{}
	if *fleetCluster == "" {
		return out
	}
	for _, n := range parseSizes(b, "fleet-cluster", *fleetCluster) {
		if !slices.Contains(sizes, n) {
			b.Fatalf("-fleet-cluster %s: %d is not one of -fleet %s (the cluster runs beside the embedded default's figures of the same N)", *fleetCluster, n, *fleetFlag)
		}
		out[n] = true
	}
	return out
}

// fleetResult is what a sub-benchmark measured.
type fleetResult struct {
	loopsPerSec  float64
	cpuPerLoop   float64     // CPU seconds of this process a loop
	pgCPUPerLoop float64     // of Postgres's tree a loop (ours only)
	flows        []bare.Flow // one loop's workflows, as our history shows them
}

// settle returns freed memory to the OS and resets the peak RSS, so that a
// sub-benchmark's peak is its own.
func settle(b *testing.B) {
	runtime.GC()
	debug.FreeOSMemory()
	if err := procmem.ResetPeak(); err != nil {
		b.Fatal(err)
	}
}

// benchPair is Fleet/N=n: it starts the demo (left running for
// benchCluster's comparison) and bare beside it on its server, and times
// ours's loops and bare's in turn, which goes first alternating, so both
// sides see the same machine: on a shared 2-core machine the speed moves
// from minute to minute, and timing one side after the other put that move
// into the ratio. Each loop starts after a garbage collection that returns
// the freed memory to the OS (settle), so neither pays for the other's
// garbage.
func (f *fleet) benchPair(b *testing.B) {
	settle(b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*f.timeout())
	defer cancel()
	// The emulated rack (BMCs, ramdisk agents, image writes) runs in a
	// process of its own, as `demo --rack-process` runs it: the machines'
	// work is theirs, not the engine's, and bare has none.
	rack := []string{binary(b, "better-compute"), "demo-rack", "--log-level", "warn"}
	if *fleetProfile != "" {
		rack = append(rack, "--cpu-profile", filepath.Join(*fleetProfile, fmt.Sprintf("rack-N=%d.pprof", f.n)))
	}
	d, err := demo.Start(ctx, demo.Config{Machines: f.n, DataDir: f.dir, Listen: "127.0.0.1:0",
		TemporalListen: "127.0.0.1:0", UIListen: "off", AgentsListen: "127.0.0.1:0", ImageSize: 8 << 20, Tracer: fleetTracer(b),
		RackCommand: rack})
	if err != nil {
		b.Fatalf("demo.Start(%d machines) = %v", f.n, err)
	}
	f.demo = d
	pg, err := procmem.PidFile(filepath.Join(f.dir, "postgres", "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	// Each sample reads every process's /proc/pid/stat to find the tree: at
	// 100ms that was 2.4% of ours's CPU at N=200, which bare does not pay.
	sampler := procmem.Sample(pg, time.Second) // the rack's the demo samples (RackPeak)
	defer sampler.Stop()
	nodes := enrollFleet(ctx, b, d)
	tg := fleetTarget{apis: []*demo.Client{d.API}, temporal: d.CP.Client(), profile: d.Profile}
	// Warm-up: the first deploy fills the site's image cache; its flows are
	// the plan bare runs.
	flows := readRuns(b, d.CP.Client(), loopFleet(ctx, b, tg, nodes), wf.ControlPlaneQueue, nil).flows
	bl := startBare(ctx, b, f)
	defer bl.Stop()
	loopBare(ctx, b, bl, f.n, flows) // warm-up, as ours

	var ours, base side
	var peak int64
	// The CPU Postgres's tree and the rack's process use in each side's
	// loops: the machines' work and the database's are ours's; what they
	// use in bare's loops (idle) is bare's.
	var pgCPU, rackCPU, bareOthersCPU time.Duration
	others := func() (pgNow, rackNow time.Duration) { return treeCPU(b, pg), treeCPU(b, d.RackPID()) }
	oursLoop := func(i int) {
		settle(b) // the peak is ours's loops', not bare's
		pgCPU0, rackCPU0 := others()
		ours.time(b, "ours", f.n, i, func() []runRef { return loopFleet(ctx, b, tg, nodes) })
		pgCPU1, rackCPU1 := others()
		pgCPU += pgCPU1 - pgCPU0
		rackCPU += rackCPU1 - rackCPU0
		p, err := procmem.PeakRSS()
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, p)
	}
	bareLoop := func(i int) {
		settle(b) // as ours's, so neither side pays for the other's garbage
		pgCPU0, rackCPU0 := others()
		base.time(b, "bare", f.n, i, func() []runRef { return loopBare(ctx, b, bl, f.n, flows) })
		pgCPU1, rackCPU1 := others()
		bareOthersCPU += pgCPU1 - pgCPU0 + rackCPU1 - rackCPU0
	}
	pair := func(i int) {
		if i%2 == 0 {
			oursLoop(i)
			bareLoop(i)
		} else {
			bareLoop(i)
			oursLoop(i)
		}
	}
	i := 0
	for ; b.Loop(); i++ {
		pair(i)
	}
	// A small fleet runs pairs beyond -benchtime's up to -fleet-min-loops
	// machine loops a side: three loops of one machine (a second) leave its
	// ratio to chance. No figure reads the framework's timer.
	for ; i*f.n < *fleetMinLoops; i++ {
		pair(i)
	}
	pgPeak, pgErr := sampler.Stop()
	rackPeak, rackErr := d.RackPeak()
	if pgErr != nil || rackErr != nil {
		b.Fatalf("Postgres's peak RSS: %v; the rack's: %v", pgErr, rackErr)
	}
	st := readRuns(b, d.CP.Client(), ours.runs, wf.ControlPlaneQueue, flows)
	f.ours = reportFleet(b, "", st, ours.elapsed(), ours.cpu)
	f.ours.pgCPUPerLoop = pgCPU.Seconds() / float64(st.loops)
	b.ReportMetric(f.ours.pgCPUPerLoop, "cpu-s-pg/loop")
	rackPerLoop := rackCPU.Seconds() / float64(st.loops)
	b.ReportMetric(rackPerLoop, "cpu-s-rack/loop")
	b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-RSS")
	b.ReportMetric(float64(pgPeak)/(1<<20), "MiB-pg-peak-RSS")
	b.ReportMetric(float64(rackPeak)/(1<<20), "MiB-rack-peak-RSS")
	res := reportFleet(b, "bare-", readRuns(b, d.CP.Client(), base.runs, bare.HomeQueue, flows), base.elapsed(), base.cpu)
	b.ReportMetric(res.loopsPerSec/f.ours.loopsPerSec, "ours/bare")
	b.ReportMetric(f.ours.cpuPerLoop/res.cpuPerLoop, "cpu-ours/bare")
	// Every process's CPU a loop: on a machine whose cores the test process,
	// Postgres and the rack share, this is the ratio the time ratio follows.
	bareOthers := bareOthersCPU.Seconds() / float64(len(base.loops)*f.n) // a machine's loop, as st.loops counts
	b.ReportMetric(bareOthers, "bare-cpu-s-others/loop")
	b.ReportMetric((f.ours.cpuPerLoop+f.ours.pgCPUPerLoop+rackPerLoop)/(res.cpuPerLoop+bareOthers), "cpu-all-ours/bare")
	// Each pair's ratio (ours's loop i over bare's), for the spread.
	var pairs []float64
	for i := range ours.loops {
		pairs = append(pairs, ours.loops[i].Seconds()/base.loops[i].Seconds())
	}
	slices.Sort(pairs)
	b.ReportMetric(pairs[0], "ours/bare-min")
	b.ReportMetric(pairs[len(pairs)/2], "ours/bare-median")
	b.ReportMetric(pairs[len(pairs)-1], "ours/bare-max")
}

// side is what one side's timed loops ran and took.
type side struct {
	runs  []runRef
	loops []time.Duration // each timed loop's time
	cpu   time.Duration   // of this process, all loops
}

// elapsed is the side's loops' time.
func (s *side) elapsed() (d time.Duration) {
	for _, l := range s.loops {
		d += l
	}
	return d
}

// time runs loop i of who, timed and, with -fleet-cpuprofile, profiled.
func (s *side) time(b *testing.B, who string, n, i int, loop func() []runRef) {
	stopProfile := profileLoop(b, who, n, i)
	cpu0, t0 := processCPU(b), time.Now()
	s.runs = append(s.runs, loop()...)
	s.loops = append(s.loops, time.Since(t0))
	s.cpu += processCPU(b) - cpu0
	stopProfile()
}

// profileLoop starts a CPU profile of timed loop i when -fleet-cpuprofile
// names a directory, and returns what stops it.
func profileLoop(b *testing.B, who string, n, i int) func() {
	if *fleetProfile == "" {
		return func() {}
	}
	out, err := os.Create(filepath.Join(*fleetProfile, fmt.Sprintf("%s-N=%d.%d.pprof", who, n, i)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := out.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// runRef names one workflow run of a loop.
type runRef struct {
	workflowID, runID string
	loop              int // which workflow of the loop: 0 deploy, 1 undeploy
}

// enrollFleet enrolls every machine at once and waits for all to be ready.
func enrollFleet(ctx context.Context, b *testing.B, d *demo.Demo) []string {
	machines := d.Machines()
	nodes := make([]string, len(machines))
	fails := make([]error, len(machines))
	var wg sync.WaitGroup
	slots := make(chan struct{}, demo.MaxInFlight) // as demo.LoopAll: Wait's bound holds
	for i, m := range machines {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			nodes[i], fails[i] = d.EnrollReady(ctx, m)
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

// fleetTarget is the control plane a loop goes through: its API processes
// (node i's verbs go to apis[i%len(apis)], as a load balancer would spread
// them), a Temporal client of its server or cluster (with its payload codec)
// that waits for the verbs' workflows and reads their histories, and the
// deploy profile.
type fleetTarget struct {
	apis     []*demo.Client
	temporal client.Client
	profile  string
}

// loopFleet deploys and undeploys every node at once, each verb waited for
// through its workflow's result, and returns the runs.
func loopFleet(ctx context.Context, b testing.TB, tg fleetTarget, nodes []string) []runRef {
	runs := make([][]runRef, len(nodes))
	fails := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() { runs[i], fails[i] = deployAndUndeploy(ctx, tg, tg.apis[i%len(tg.apis)], node) })
	}
	wg.Wait()
	var all []runRef
	for i := range nodes {
		if fails[i] != nil {
			b.Fatalf("loop of %s: %v", nodes[i], fails[i])
		}
		all = append(all, runs[i]...)
	}
	return all
}

func deployAndUndeploy(ctx context.Context, tg fleetTarget, api *demo.Client, node string) ([]runRef, error) {
	verbs := []struct {
		want  string
		start func() (*connect.Response[v1.VerbResponse], error)
	}{
		{"deployed", func() (*connect.Response[v1.VerbResponse], error) {
			return api.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: node, Profile: tg.profile, ProfileVersion: 1}))
		}},
		{"ready", func() (*connect.Response[v1.VerbResponse], error) {
			return api.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: node, Wipe: "quick"}))
		}},
	}
	var runs []runRef
	for i, v := range verbs {
		r, err := v.start()
		if err != nil {
			return runs, fmt.Errorf("start %s: %w", v.want, err)
		}
		var res wf.Result
		if err := wfresult.Get(ctx, tg.temporal, r.Msg.WorkflowId, r.Msg.RunId, &res); err != nil {
			return runs, fmt.Errorf("workflow %s: %w", r.Msg.RunId, err)
		}
		if string(res.State) != v.want {
			return runs, fmt.Errorf("workflow %s ended with the node %s, want %s", r.Msg.RunId, res.State, v.want)
		}
		runs = append(runs, runRef{workflowID: r.Msg.WorkflowId, runID: r.Msg.RunId, loop: i})
	}
	return runs, nil
}

// runStats is what the histories of a sub-benchmark's runs show.
type runStats struct {
	loops, activities int
	flows             []bare.Flow     // one loop's workflows, as most machines ran them
	offPlan           int             // runs that went another way (a retry, a recovery)
	time              bare.Timing     // summed over the runs
	loopWalls         []time.Duration // each loop's, its workflows' walls summed
}

// readRuns reads every run's history. The flow of a loop (its steps with
// their options, and the names of its search attributes) is the one most of
// its runs followed, which must be want's when given; a run that went
// another way (a command retried, a ramdisk boot restarted: at 1,000
// machines on 2 cores a ramdisk can miss its boot deadline) is counted in
// offPlan and its time in the figures, and the first one is logged.
func readRuns(b testing.TB, c client.Client, runs []runRef, homeQueue string, want []bare.Flow) runStats {
	var st runStats
	var ran []ranFlow
	for _, r := range runs {
		h := historyOf(b, c, r.workflowID, r.runID)
		f, err := bare.FlowOf(h, homeQueue)
		if err != nil {
			b.Fatalf("run %s of %s: %v", r.runID, r.workflowID, err)
		}
		tm := bare.Times(h)
		st.activities += len(f.Plan)
		st.time.Add(tm)
		if r.loop == 0 {
			st.loops++
			st.loopWalls = append(st.loopWalls, 0)
		}
		st.loopWalls[len(st.loopWalls)-1] += tm.Wall
		ran = append(ran, ranFlow{r, f, shape(f)})
	}
	var off []ranFlow
	st.flows, off = commonFlows(ran)
	st.offPlan = len(off)
	if len(off) > 0 {
		o := off[0]
		b.Logf("%d of %d runs went another way than most of their loop position's, e.g. run %s of %s: %s, where most ran %s",
			len(off), len(ran), o.run.runID, o.run.workflowID, o.shape, shape(st.flows[o.run.loop]))
	}
	for i := range want {
		if i >= len(st.flows) || shape(want[i]) != shape(st.flows[i]) {
			b.Fatalf("readRuns: the loops ran %v, want %v", shapes(st.flows), shapes(want))
		}
	}
	return st
}

// ranFlow is a run with the flow it followed.
type ranFlow struct {
	run   runRef
	flow  bare.Flow
	shape string
}

// commonFlows returns, for each position of a machine's loop (its deploy,
// its undeploy), the flow most runs there followed (the first seen of
// those tied), and the runs that followed another.
func commonFlows(ran []ranFlow) (flows []bare.Flow, off []ranFlow) {
	var count []map[string]int
	for _, r := range ran {
		for len(count) <= r.run.loop {
			count = append(count, map[string]int{})
			flows = append(flows, bare.Flow{})
		}
		count[r.run.loop][r.shape]++
	}
	best := make([]string, len(count))
	for _, r := range ran {
		i := r.run.loop
		if count[i][r.shape] > count[i][best[i]] { // best[i] "" counts 0
			best[i], flows[i] = r.shape, r.flow
		}
	}
	for _, r := range ran {
		if r.shape != best[r.run.loop] {
			off = append(off, r)
		}
	}
	return flows, off
}

// shape is what must match between two runs of a flow: its steps with their
// options, and which search attributes it started with (their values name
// the node).
func shape(f bare.Flow) string {
	names := slices.Sorted(maps.Keys(bare.Values(f.SearchAttributes)))
	return fmt.Sprintf("%v search attributes %v", f.Plan, names)
}

func shapes(fs []bare.Flow) []string {
	var out []string
	for _, f := range fs {
		out = append(out, shape(f))
	}
	return out
}

func historyOf(b testing.TB, c client.Client, id, runID string) []*historypb.HistoryEvent {
	iter := c.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			b.Fatalf("history of %s: %v", runID, err)
		}
		events = append(events, ev)
	}
	return events
}

// bareSite is the baseline's site: its own task queue, so the demo's site
// agent never sees the baseline's activities.
const bareSite = "site_bare"

func startBare(ctx context.Context, b *testing.B, f *fleet) *bare.Baseline {
	cp := f.demo.CP
	ca, err := pki.Load(filepath.Join(f.dir, "pki"))
	if err != nil {
		b.Fatal(err)
	}
	host, _, err := net.SplitHostPort(cp.TemporalAddress())
	if err != nil {
		b.Fatal(err)
	}
	tc, err := bare.SiteTLS(ca, bareSite, host)
	if err != nil {
		b.Fatal(err)
	}
	// The bare workflows copy our search attributes, TenantId root among
	// them, so their payloads are under root's codec key, as ours are.
	key, err := cp.Store().CurrentKey(ctx, store.PurposeCodec, api.RootTenant)
	if err != nil {
		b.Fatal(err)
	}
	away, err := bare.Dial(ctx, cp.TemporalAddress(), controlplane.DefaultNamespace, key.Key, tc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(away.Close)
	bl, err := bare.Start(bare.Config{Home: cp.Client(), Away: away, AwayQueue: kinds.SiteTaskQueue(bareSite)})
	if err != nil {
		b.Fatalf("bare.Start = %v", err)
	}
	return bl
}

func loopBare(ctx context.Context, b *testing.B, bl *bare.Baseline, n int, flows []bare.Flow) []runRef {
	runs := make([][]string, n)
	fails := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { runs[i], fails[i] = bl.Run(ctx, fmt.Sprintf("m%02d", i), flows) })
	}
	wg.Wait()
	var all []runRef
	for i := range n {
		if fails[i] != nil {
			b.Fatalf("bare loop: %v", fails[i])
		}
		for j, id := range runs[i] {
			all = append(all, runRef{workflowID: fmt.Sprintf("bare/m%02d", i), runID: id, loop: j})
		}
	}
	return all
}

// reportFleet reports the metrics common to ours and bare.
func reportFleet(b *testing.B, prefix string, st runStats, elapsed, cpu time.Duration) fleetResult {
	local, perLoop := 0, 0
	for _, f := range st.flows {
		l, reg := f.Plan.Counts()
		local, perLoop = local+l, perLoop+l+reg
	}
	res := fleetResult{loopsPerSec: float64(st.loops) / elapsed.Seconds(), cpuPerLoop: cpu.Seconds() / float64(st.loops), flows: st.flows}
	b.ReportMetric(res.loopsPerSec, prefix+"loops/s")
	b.ReportMetric(res.cpuPerLoop, prefix+"cpu-s/loop")
	b.ReportMetric(float64(st.activities)/elapsed.Seconds(), prefix+"acts/s")
	b.ReportMetric(float64(perLoop), prefix+"acts/loop")
	b.ReportMetric(float64(local), prefix+"local/loop")
	each := func(d time.Duration) float64 { return d.Seconds() / float64(st.loops) }
	b.ReportMetric(each(st.time.Wall), prefix+"s-wall/loop")
	b.ReportMetric(each(st.time.InActivities), prefix+"s-in-acts/loop")
	b.ReportMetric(each(st.time.ActivityWait), prefix+"s-act-wait/loop")
	b.ReportMetric(each(st.time.InTasks), prefix+"s-in-tasks/loop")
	b.ReportMetric(each(st.time.TaskWait), prefix+"s-task-wait/loop")
	b.ReportMetric(each(st.time.FirstTaskWait), prefix+"s-first-wait/loop")
	b.ReportMetric(quantile(st.loopWalls, 0.50).Seconds(), prefix+"s-p50/loop")
	b.ReportMetric(quantile(st.loopWalls, 0.99).Seconds(), prefix+"s-p99/loop")
	b.ReportMetric(float64(st.offPlan), prefix+"off-plan-runs")
	who := strings.TrimSuffix(cmp.Or(prefix, "ours-"), "-")
	b.Logf("%s %s: activities running, mean ms (runs a loop): %s", b.Name(), who, byType(st.time.ByType, st.loops))
	return res
}

// byType lists each activity type's mean running time and runs a loop,
// the longest in all first.
func byType(m map[string]bare.Running, loops int) string {
	types := slices.Collect(maps.Keys(m))
	slices.SortFunc(types, func(a, b string) int { return cmp.Compare(m[b].Took, m[a].Took) })
	var parts []string
	for _, t := range types {
		r := m[t]
		parts = append(parts, fmt.Sprintf("%s %.2f (%.0f)", t, float64(r.Took.Microseconds())/1000/float64(r.N), float64(r.N)/float64(loops)))
	}
	return strings.Join(parts, ", ")
}

// quantile is the q-quantile of ds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// treeCPU is the CPU time the process tree under root has used.
func treeCPU(b testing.TB, root int) time.Duration {
	d, err := procmem.TreeCPU(root)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// processCPU is the CPU time (user and system) this process has used: on a
// shared machine a loop's CPU seconds vary less than its wall time.
func processCPU(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
