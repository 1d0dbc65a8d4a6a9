// Package metrics owns what better-compute exports to Prometheus: one
// registry per process (never the global default), the families the control
// plane and the site agent count, and the /metrics handler. Every label set
// is bounded: kinds, states, statuses, methods and codes, never a node id.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ControlPlane is the control plane's metrics.
type ControlPlane struct {
	reg          *prometheus.Registry
	Commands     *prometheus.CounterVec   // kind, status
	APIRequests  *prometheus.CounterVec   // method, code
	Verbs        *prometheus.CounterVec   // verb, outcome
	VerbDuration *prometheus.HistogramVec // verb
}

// NodeStates counts nodes per state, read on each scrape.
type NodeStates func(ctx context.Context) (map[string]int, error)

// NewControlPlane registers the control plane's families; nodes, when not
// nil, is asked for the node counts on every scrape.
func NewControlPlane(nodes NodeStates, log *slog.Logger) *ControlPlane {
	m := &ControlPlane{
		reg: prometheus.NewRegistry(),
		Commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_commands_total",
			Help: "Commands finished, by kind and status (succeeded, failed, ...)."}, []string{"kind", "status"}),
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_api_requests_total",
			Help: "API calls answered, by method and Connect code."}, []string{"method", "code"}),
		Verbs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_verbs_total",
			Help: "Verbs' workflows started, finished and failed, by verb."}, []string{"verb", "outcome"}),
		VerbDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "better_compute_verb_duration_seconds",
			Help:    "How long a verb's workflow ran, from its start to its end (finished or failed).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}, []string{"verb"}), // 1s to ~2h15m
	}
	m.reg.MustRegister(m.Commands, m.APIRequests, m.Verbs, m.VerbDuration)
	if nodes != nil {
		m.reg.MustRegister(&nodeCollector{nodes: nodes, log: log})
	}
	return m
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *ControlPlane) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// CommandFinished counts a command's outcome. A nil m counts nothing.
func (m *ControlPlane) CommandFinished(kind, status string) {
	if m != nil {
		m.Commands.WithLabelValues(kind, status).Inc()
	}
}

// Verb outcomes, the values of better_compute_verbs_total's outcome label.
const (
	OutcomeStarted  = "started"
	OutcomeFinished = "finished" // the workflow returned no error
	OutcomeFailed   = "failed"   // it returned one (the node failed, or the verb was aborted)
)

// VerbStarted counts a verb's workflow starting. A nil m counts nothing.
func (m *ControlPlane) VerbStarted(verb string) {
	if m != nil {
		m.Verbs.WithLabelValues(verb, OutcomeStarted).Inc()
	}
}

// VerbEnded counts a verb's workflow ending, failed when err is not nil,
// and how long it ran.
func (m *ControlPlane) VerbEnded(verb string, err error, took time.Duration) {
	if m == nil {
		return
	}
	outcome := OutcomeFinished
	if err != nil {
		outcome = OutcomeFailed
	}
	m.Verbs.WithLabelValues(verb, outcome).Inc()
	m.VerbDuration.WithLabelValues(verb).Observe(took.Seconds())
}

var nodesDesc = prometheus.NewDesc("better_compute_nodes", "Nodes per state, across tenants.", []string{"state"}, nil)

// nodeCollector reads the node counts when scraped, so the gauge is the
// store's truth and not a tally that drifts.
type nodeCollector struct {
	nodes NodeStates
	log   *slog.Logger
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- nodesDesc }

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.nodes(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(nodesDesc, err)
		return
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), state)
	}
}
