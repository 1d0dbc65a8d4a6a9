// Package metrics owns what better-compute exports to Prometheus: one
// registry per process (never the global default), the families the control
// plane and the site agent count, and the /metrics handler. Every label set
// is bounded: kinds, states, statuses, methods and codes, never a node id.
package metrics

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
)

// ControlPlane is the control plane's metrics.
type ControlPlane struct {
	reg             *prometheus.Registry
	more            []prometheus.Gatherer // served beside reg (the embedded Temporal server's)
	sdk             *sdkMetrics
	log             *slog.Logger
	Commands        *prometheus.CounterVec   // kind, status
	CommandDuration *prometheus.HistogramVec // kind
	APIRequests     *prometheus.CounterVec   // method, code
	Verbs           *prometheus.CounterVec   // verb, outcome
	VerbDuration    *prometheus.HistogramVec // verb
	WipedBytes      *prometheus.CounterVec   // mode
}

// NewControlPlane registers the control plane's families; counts, when not
// nil, is asked for what the store holds (nodes, join tokens) on every
// scrape.
func NewControlPlane(counts StoreCounts, log *slog.Logger) *ControlPlane {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &ControlPlane{
		reg: prometheus.NewRegistry(),
		sdk: newSDKMetrics(),
		log: log,
		Commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_commands_total",
			Help: "Commands finished, by kind and status (succeeded, failed, ...)."}, []string{"kind", "status"}),
		CommandDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "better_compute_command_duration_seconds",
			Help:    "How long a finished command took, from the command log's start to its finish (queueing and retries included).",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 12)}, []string{"kind"}), // 10 ms to ~30 min
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_api_requests_total",
			Help: "API calls answered, by method and Connect code."}, []string{"method", "code"}),
		Verbs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_verbs_total",
			Help: "Verbs' workflows started, finished and failed, by verb."}, []string{"verb", "outcome"}),
		VerbDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "better_compute_verb_duration_seconds",
			Help:    "How long a verb's workflow ran, from its start to its end (finished or failed).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}, []string{"verb"}), // 1s to ~2h15m
		WipedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_wiped_bytes_total",
			Help: "Bytes of disk whose wipe a machine attested and the control plane verified, by wipe mode."}, []string{"mode"}),
	}
	m.reg.MustRegister(m.Commands, m.CommandDuration, m.APIRequests, m.Verbs, m.VerbDuration, m.WipedBytes, m.sdk)
	if counts != nil {
		m.reg.MustRegister(&storeCollector{counts: counts})
	}
	return m
}

// Temporal is the handler the control plane's Temporal client records the
// SDK's metrics with (client.Options.MetricsHandler).
func (m *ControlPlane) Temporal() client.MetricsHandler { return sdkHandler{m: m.sdk} }

// Include serves g's families beside the control plane's own (the embedded
// Temporal server's registry). Call it before serving.
func (m *ControlPlane) Include(g prometheus.Gatherer) { m.more = append(m.more, g) }

// Handler serves the registry, and what Include added, in the Prometheus
// exposition formats. A family that fails to gather is logged and left
// out; the rest is served.
func (m *ControlPlane) Handler() http.Handler {
	return promhttp.HandlerFor(merged(append([]prometheus.Gatherer{m.reg}, m.more...)),
		promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)})
}

// CommandFinished counts a command's outcome and how long it took. A nil m
// counts nothing.
func (m *ControlPlane) CommandFinished(kind, status string, took time.Duration) {
	if m != nil {
		m.Commands.WithLabelValues(kind, status).Inc()
		m.CommandDuration.WithLabelValues(kind).Observe(took.Seconds())
	}
}

// WipeVerified counts the bytes of a verified wipe. A nil m counts nothing.
func (m *ControlPlane) WipeVerified(mode string, bytes int64) {
	if m != nil {
		m.WipedBytes.WithLabelValues(mode).Add(float64(bytes))
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
