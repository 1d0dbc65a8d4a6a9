//go:build fakehw

package demo_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
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

	site := scrapeHandler(t, d.Agent.Metrics().Handler())
	checkSite(t, site, 3*machines, wantCommands[kinds.CacheEnsureImage+" succeeded"], wantRelayed)
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
		out[key] += m.GetCounter().GetValue()
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
