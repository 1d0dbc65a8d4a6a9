package siteagent

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// TestMetricsListen: with --metrics-listen the agent serves /metrics with
// what its parts counted (a boot armed through its boot table), in the
// format Prometheus parses; without it, nothing listens and the counts are
// still kept.
func TestMetricsListen(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.MetricsListen = "127.0.0.1:0"
	a := startAgent(t, cfg)
	if err := a.Activities().Boot.SetEntry(kinds.BootEntry{NodeID: nodeA, MACs: []string{"52:54:00:aa:00:01"},
		Ramdisk: true, DiscoveryToken: "bcdisc_abc"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.MetricsURL(), "http://127.0.0.1:") {
		t.Fatalf("MetricsURL() = %q, want http://127.0.0.1:<port>/metrics", a.MetricsURL())
	}
	resp, err := http.Get(a.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	ms := fams["better_compute_boot_milestones_total"].GetMetric()
	if len(ms) != 1 || ms[0].GetLabel()[0].GetValue() != "armed" || ms[0].GetCounter().GetValue() != 1 {
		t.Errorf("better_compute_boot_milestones_total = %v, want armed 1", ms)
	}

	off := testConfig(t, fakecp.Start(t))
	b := startAgent(t, off)
	if b.MetricsURL() != "" || b.Metrics() == nil {
		t.Errorf("without --metrics-listen: MetricsURL() = %q, Metrics() = %v; want \"\" and a registry", b.MetricsURL(), b.Metrics())
	}
}
