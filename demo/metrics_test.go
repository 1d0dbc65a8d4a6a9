//go:build fakehw

package demo_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/kinds"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestMetricsAfterLoop: after the demo's loop (enroll, deploy, undeploy of
// each machine), the control plane's /metrics counts exactly the verbs the
// run did, started and finished, none failed, and the commands per kind and
// status that `commands list` shows; the site agent's counts the ramdisk
// boots' milestones, the image cache's lookups and the relayed commands
// that list shows, all parsed by the Prometheus text parser.
func TestMetricsAfterLoop(t *testing.T) {
	const machines = 2
	d := start(t, machines)
	ctx := ctxFor(t, 8*time.Minute)
	nodes, failed := d.LoopAll(ctx)
	if len(failed) > 0 {
		t.Fatalf("LoopAll = %v", failed)
	}
	var cmds []*v1.Command
	for _, node := range nodes {
		got, err := commandsOf(ctx, d.API, node)
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, got...)
	}

	wantVerbs := map[string]float64{}
	for _, verb := range []string{wf.Enroll, wf.Deploy, wf.Undeploy} {
		wantVerbs[verb+" started"], wantVerbs[verb+" finished"] = machines, machines
	}
	// A verb's workflow ends just after its node reaches the state Wait saw.
	var cp map[string]*dto.MetricFamily
	deadline := time.Now().Add(30 * time.Second)
	for {
		cp = scrapeHandler(t, d.CP.Metrics().Handler())
		if cmp.Equal(wantVerbs, samples(cp, "better_compute_verbs_total", "verb", "outcome")) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if diff := cmp.Diff(wantVerbs, samples(cp, "better_compute_verbs_total", "verb", "outcome")); diff != "" {
		t.Errorf("better_compute_verbs_total (-want +got):\n%s", diff)
	}
	if got := durations(cp, "better_compute_verb_duration_seconds"); !cmp.Equal(got, map[string]uint64{
		wf.Enroll: machines, wf.Deploy: machines, wf.Undeploy: machines}) {
		t.Errorf("better_compute_verb_duration_seconds sample counts = %v, want %d of each verb", got, machines)
	}
	wantCommands, wantRelayed := map[string]float64{}, map[string]float64{}
	for _, c := range cmds {
		wantCommands[c.Kind+" "+c.Status]++
		if c.RunsOn == "ramdisk" {
			wantRelayed[c.Kind+" "+c.Status]++
		}
	}
	if diff := cmp.Diff(wantCommands, samples(cp, "better_compute_commands_total", "kind", "status")); diff != "" {
		t.Errorf("better_compute_commands_total, against commands list (-want +got):\n%s", diff)
	}

	checkCommandDurations(t, cp, cmds)
	checkStore(t, d, cp, machines)
	checkWiped(t, d, cp, nodes, cmds)

	site := scrapeHandler(t, d.Agent.Metrics().Handler())
	checkSite(t, site, 3*machines, wantCommands[kinds.CacheEnsureImage+" succeeded"], wantRelayed)
	checkBMC(t, d, site, nodes, cmds)
	if got, want := samples(site, "better_compute_image_written_bytes_total")[""],
		wantCommands[kinds.DeployImage+" succeeded"]*float64(d.Image.Raw); got != want {
		t.Errorf("better_compute_image_written_bytes_total = %v, want %v (each succeeded %s wrote the %d-byte image)",
			got, want, kinds.DeployImage, d.Image.Raw)
	}
	checkTemporal(t, cp, site)
}

// checkCommandDurations: one duration per command of each kind, summing to
// what `commands list` shows (its durations are whole milliseconds).
func checkCommandDurations(t *testing.T, cp map[string]*dto.MetricFamily, cmds []*v1.Command) {
	t.Helper()
	wantCount, wantSum := map[string]uint64{}, map[string]float64{}
	for _, c := range cmds {
		wantCount[c.Kind]++
		wantSum[c.Kind] += float64(c.DurationMs) / 1000
	}
	for _, m := range cp["better_compute_command_duration_seconds"].GetMetric() {
		kind := label(m, "kind")
		h := m.GetHistogram()
		if h.GetSampleCount() != wantCount[kind] || math.Abs(h.GetSampleSum()-wantSum[kind]) > 0.001*float64(wantCount[kind]) {
			t.Errorf("better_compute_command_duration_seconds{kind=%q} = %d samples, %.3fs; want %d, %.3fs",
				kind, h.GetSampleCount(), h.GetSampleSum(), wantCount[kind], wantSum[kind])
		}
		delete(wantCount, kind)
	}
	if len(wantCount) > 0 {
		t.Errorf("better_compute_command_duration_seconds lacks kinds %v", wantCount)
	}
}

// checkStore: the families read from the store at the scrape: every
// machine ready in the demo's pool, one site token issued and used, one
// discovery token a ramdisk boot (3 a machine), all used, none expired.
func checkStore(t *testing.T, d *demo.Demo, cp map[string]*dto.MetricFamily, machines float64) {
	t.Helper()
	if diff := cmp.Diff(map[string]float64{"ready " + d.PoolID: machines},
		samples(cp, "better_compute_nodes", "state", "pool")); diff != "" {
		t.Errorf("better_compute_nodes (-want +got):\n%s", diff)
	}
	want := map[string]float64{"site": 1, "disc": 3 * machines}
	for _, name := range []string{"better_compute_join_tokens_issued_total", "better_compute_join_tokens_used_total"} {
		if diff := cmp.Diff(want, samples(cp, name, "kind")); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(map[string]float64{"site": 0, "disc": 0},
		samples(cp, "better_compute_join_tokens_expired", "kind")); diff != "" {
		t.Errorf("better_compute_join_tokens_expired (-want +got):\n%s", diff)
	}
}

// checkWiped: each succeeded disk.wipe verified every disk of its machine
// whole (a quick wipe reads it all back), counted by mode.
func checkWiped(t *testing.T, d *demo.Demo, cp map[string]*dto.MetricFamily, nodes map[string]string, cmds []*v1.Command) {
	t.Helper()
	var want float64
	for _, id := range nodes {
		var disks float64
		for _, x := range node(t, d, id).GetInventory().GetFields()["disks"].GetListValue().GetValues() {
			disks += x.GetStructValue().GetFields()["sizeBytes"].GetNumberValue()
		}
		for _, c := range cmds {
			if c.NodeId == id && c.Kind == kinds.DiskWipe && c.Status == kinds.CommandSucceeded {
				want += disks
			}
		}
	}
	if got := samples(cp, "better_compute_wiped_bytes_total", "mode"); want == 0 || !cmp.Equal(got, map[string]float64{"quick": want}) {
		t.Errorf("better_compute_wiped_bytes_total = %v, want quick %v (the disks of each succeeded %s)", got, want, kinds.DiskWipe)
	}
}

// checkBMC: a BMC call per attempt of each BMC command, under the driver
// of its machine, all ok, each with its duration; every machine's BMC's
// breaker closed.
func checkBMC(t *testing.T, d *demo.Demo, site map[string]*dto.MetricFamily, nodes map[string]string, cmds []*v1.Command) {
	t.Helper()
	driver := map[string]string{}
	for _, id := range nodes {
		driver[id] = node(t, d, id).GetBmcDriver()
	}
	want := map[string]float64{}
	for _, c := range cmds {
		switch c.Kind {
		case kinds.PowerSetPower, kinds.ManagementSetBootDevice, kinds.BMCInspect:
			want[driver[c.NodeId]+" "+c.Kind+" ok"] += float64(c.Attempt)
		}
	}
	if diff := cmp.Diff(want, samples(site, "better_compute_bmc_calls_total", "driver", "call", "outcome")); diff != "" || len(want) == 0 {
		t.Errorf("better_compute_bmc_calls_total, against commands list's BMC commands (-want +got):\n%s", diff)
	}
	var calls, timed float64
	for _, n := range want {
		calls += n
	}
	for _, m := range site["better_compute_bmc_call_duration_seconds"].GetMetric() {
		timed += float64(m.GetHistogram().GetSampleCount())
	}
	if timed != calls {
		t.Errorf("better_compute_bmc_call_duration_seconds counts %v calls, want %v", timed, calls)
	}
	bmcs := map[string]bool{}
	for _, id := range nodes {
		bmcs[node(t, d, id).GetBmcAddress()] = true
	}
	if diff := cmp.Diff(map[string]float64{"closed": float64(len(bmcs)), "failing": 0, "open": 0, "half-open": 0},
		samples(site, "better_compute_bmc_breakers", "state")); diff != "" {
		t.Errorf("better_compute_bmc_breakers, every BMC answering (-want +got):\n%s", diff)
	}
}

// checkTemporal: the Temporal SDK's metrics of the control plane's client
// and worker and of the site's, and the embedded server's own, each with
// requests counted.
func checkTemporal(t *testing.T, cp, site map[string]*dto.MetricFamily) {
	t.Helper()
	for _, c := range []struct {
		where string
		fams  map[string]*dto.MetricFamily
		name  string
	}{
		{"control plane", cp, "temporal_request_total"},
		{"control plane", cp, "temporal_workflow_completed_total"},
		{"site", site, "temporal_request_total"},
		{"site", site, "temporal_activity_execution_latency_seconds"},
		{"control plane (server)", cp, "service_requests_total"},
	} {
		var n float64
		for _, m := range c.fams[c.name].GetMetric() {
			n += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		if n <= 0 {
			t.Errorf("%s: %s = %v, want some", c.where, c.name, n)
		}
	}
}

// checkSite checks the site agent's families: each of the boots ramdisk
// boots (one a verb) armed, fetched its script and joined once, however
// often its ramdisk polled (the emulated machines fetch no kernel); one
// image lookup a succeeded cache.ensureImage; the relayed commands as the
// command log has them.
func checkSite(t *testing.T, site map[string]*dto.MetricFamily, boots, ensures float64, wantRelayed map[string]float64) {
	t.Helper()
	ms := samples(site, "better_compute_boot_milestones_total", "milestone")
	if diff := cmp.Diff(map[string]float64{"armed": boots, "script": boots, "joined": boots}, ms); diff != "" {
		t.Errorf("better_compute_boot_milestones_total (-want +got):\n%s", diff)
	}
	lookups := samples(site, "better_compute_image_cache_lookups_total", "result")
	if lookups["hit"]+lookups["miss"] != ensures || lookups["miss"] < 1 {
		t.Errorf("better_compute_image_cache_lookups_total = %v, want %v in all (the succeeded %s), a miss first",
			lookups, ensures, kinds.CacheEnsureImage)
	}
	if got := samples(site, "better_compute_image_cache_fetched_bytes_total")[""]; got <= 0 {
		t.Errorf("better_compute_image_cache_fetched_bytes_total = %v, want the image's bytes", got)
	}
	relayed := samples(site, "better_compute_relayed_commands_total", "kind", "outcome")
	if diff := cmp.Diff(wantRelayed, relayed); diff != "" {
		t.Errorf("better_compute_relayed_commands_total, against commands list's ramdisk commands (-want +got):\n%s", diff)
	}
}

// scrapeHandler GETs /metrics from h and parses it as Prometheus does.
func scrapeHandler(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// samples maps each sample of family name to its value, keyed by the
// values of labels joined by spaces.
func samples(fams map[string]*dto.MetricFamily, name string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fams[name].GetMetric() {
		key := ""
		for i, l := range labels {
			if i > 0 {
				key += " "
			}
			key += label(m, l)
		}
		out[key] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return out
}

// durations maps each verb to its histogram's sample count.
func durations(fams map[string]*dto.MetricFamily, name string) map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range fams[name].GetMetric() {
		out[label(m, "verb")] = m.GetHistogram().GetSampleCount()
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return fmt.Sprintf("<no %s>", name)
}
