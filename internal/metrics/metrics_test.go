package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// scrape GETs h and parses the exposition as Prometheus does.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is the sample of family name whose labels are all of want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	for _, m := range fams[name].GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match == len(want) {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return -1
}

// sampled is a histogram's sample count and sum.
type sampled struct {
	Count uint64
	Sum   float64
}

// histograms maps each histogram of family name, by its label, to its
// count and sum.
func histograms(fams map[string]*dto.MetricFamily, name, label string) map[string]sampled {
	out := map[string]sampled{}
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = sampled{m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()}
			}
		}
	}
	return out
}

// TestControlPlaneScrape: what was counted (commands and their durations,
// API calls through a real Connect handler, wiped bytes) and what the store
// says (nodes per state and pool, join tokens) come out of /metrics with
// those values, in the text format Prometheus parses.
func TestControlPlaneScrape(t *testing.T) {
	counts := func(context.Context) (Counts, error) {
		return Counts{
			Nodes: map[NodeGroup]int{{"ready", "pool_a"}: 3, {"ready", "pool_b"}: 2, {"failed", "pool_a"}: 1},
			Tokens: map[string]TokenCount{"site": {Issued: 2, Used: 1, Expired: 1},
				"disc": {Issued: 6, Used: 6}},
		}, nil
	}
	m := NewControlPlane(counts, nil)
	for range 3 {
		m.CommandFinished("disk.wipe", "succeeded", 2*time.Second)
	}
	m.CommandFinished("deploy.image", "failed", 500*time.Millisecond)
	m.WipeVerified("quick", 1<<30)
	m.WipeVerified("quick", 1<<30)
	m.VerbStarted("metal.deploy")
	m.VerbEnded("metal.deploy", nil, 90*time.Second)
	m.VerbStarted("metal.deploy")
	m.VerbEnded("metal.deploy", errors.New("boom"), time.Second)

	api := httptest.NewUnstartedServer(nil)
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker("a.v1.A"), connect.WithInterceptors(m.Interceptor())))
	api.Config.Handler = mux
	api.Start()
	defer api.Close()
	hc := grpchealth.NewClient(api.Client(), api.URL)
	if _, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: "a.v1.A"}); err != nil {
		t.Fatal(err)
	}
	var ce *connect.Error
	if _, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: "nope"}); !errors.As(err, &ce) {
		t.Fatalf("Check(nope) = %v, want a Connect error", err)
	}

	fams := scrape(t, m.Handler())
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"better_compute_commands_total", map[string]string{"kind": "disk.wipe", "status": "succeeded"}, 3},
		{"better_compute_commands_total", map[string]string{"kind": "deploy.image", "status": "failed"}, 1},
		{"better_compute_wiped_bytes_total", map[string]string{"mode": "quick"}, 2 << 30},
		{"better_compute_join_tokens_issued_total", map[string]string{"kind": "site"}, 2},
		{"better_compute_join_tokens_used_total", map[string]string{"kind": "site"}, 1},
		{"better_compute_join_tokens_expired", map[string]string{"kind": "site"}, 1},
		{"better_compute_join_tokens_issued_total", map[string]string{"kind": "disc"}, 6},
		{"better_compute_join_tokens_used_total", map[string]string{"kind": "disc"}, 6},
		{"better_compute_join_tokens_expired", map[string]string{"kind": "disc"}, 0},
		{"better_compute_api_requests_total", map[string]string{"method": "grpc.health.v1.Health/Check", "code": "ok"}, 1},
		{"better_compute_api_requests_total", map[string]string{"method": "grpc.health.v1.Health/Check", "code": "not_found"}, 1},
		{"better_compute_nodes", map[string]string{"state": "ready", "pool": "pool_a"}, 3},
		{"better_compute_nodes", map[string]string{"state": "ready", "pool": "pool_b"}, 2},
		{"better_compute_nodes", map[string]string{"state": "failed", "pool": "pool_a"}, 1},
		{"better_compute_verbs_total", map[string]string{"verb": "metal.deploy", "outcome": "started"}, 2},
		{"better_compute_verbs_total", map[string]string{"verb": "metal.deploy", "outcome": "finished"}, 1},
		{"better_compute_verbs_total", map[string]string{"verb": "metal.deploy", "outcome": "failed"}, 1},
	}
	h := fams["better_compute_verb_duration_seconds"].GetMetric()
	if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 2 || h[0].GetHistogram().GetSampleSum() != 91 {
		t.Errorf("better_compute_verb_duration_seconds = %v, want 2 samples summing to 91s", h)
	}
	if got := histograms(fams, "better_compute_command_duration_seconds", "kind"); !cmp.Equal(got, map[string]sampled{
		"disk.wipe": {3, 6}, "deploy.image": {1, 0.5}}) {
		t.Errorf("better_compute_command_duration_seconds = %v, want disk.wipe 3 summing to 6s, deploy.image 1 of 0.5s", got)
	}
	for _, tt := range tests {
		if got := value(fams, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
}
