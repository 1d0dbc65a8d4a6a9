package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
)

// Site is a site agent's metrics. Its methods count nothing on a nil Site.
type Site struct {
	reg          *prometheus.Registry
	PXE          *prometheus.CounterVec // outcome
	Milestones   *prometheus.CounterVec // milestone
	CacheLookups *prometheus.CounterVec // result
	CacheBytes   prometheus.Counter
	Relayed      *prometheus.CounterVec // kind, outcome
	BMCCalls     *prometheus.CounterVec // driver, call, outcome
	BMCDuration  *prometheus.HistogramVec
	ImageWritten prometheus.Counter
	sdk          *sdkMetrics
	breakers     *breakerCollector
}

// NewSite registers the site agent's families.
func NewSite() *Site {
	m := &Site{
		reg: prometheus.NewRegistry(),
		PXE: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_pxe_requests_total",
			Help: "Proxy-DHCP requests, by outcome: answered, ignored (not ours to answer), discovered (an unknown MAC PXE-booting)."},
			[]string{"outcome"}),
		Milestones: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_boot_milestones_total",
			Help: "Ramdisk boot milestones reached (armed, dhcp, script, kernel, initrd, joined), each new one once."},
			[]string{"milestone"}),
		CacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_image_cache_lookups_total",
			Help: "Images asked of the cache, by result: hit (present and verified) or miss (fetched)."}, []string{"result"}),
		CacheBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "better_compute_image_cache_fetched_bytes_total",
			Help: "Bytes of verified images the cache fetched from their sources."}),
		Relayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_relayed_commands_total",
			Help: "Commands relayed to ramdisks, by kind and outcome: succeeded, failed, stalled (the ramdisk's boot stalled)."},
			[]string{"kind", "outcome"}),
		BMCCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "better_compute_bmc_calls_total",
			Help: "Calls to BMCs, by driver, call (the command kind) and outcome: ok or the error kind (DRIVER_ERROR, UNAUTHENTICATED, ...)."},
			[]string{"driver", "call", "outcome"}),
		BMCDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "better_compute_bmc_call_duration_seconds",
			Help:    "How long a call to a BMC took, from opening the driver to its answer (a power change until the BMC confirms it).",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 11)}, []string{"driver", "call"}), // 5 ms to ~5 min
		ImageWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "better_compute_image_written_bytes_total",
			Help: "Bytes of OS images ramdisks wrote to disk, from the succeeded deploy.image results relayed."}),
		sdk:      newSDKMetrics(),
		breakers: &breakerCollector{},
	}
	m.reg.MustRegister(m.PXE, m.Milestones, m.CacheLookups, m.CacheBytes, m.Relayed, m.BMCCalls, m.BMCDuration,
		m.ImageWritten, m.sdk, m.breakers)
	return m
}

// CountBreakers has each scrape ask states for the number of BMCs per
// circuit breaker state. Call it before serving.
func (m *Site) CountBreakers(states func() map[string]int) { m.breakers.states = states }

var breakersDesc = prometheus.NewDesc("better_compute_bmc_breakers",
	"BMCs the site agent has talked to, per circuit breaker state: closed, failing, open, half-open.", []string{"state"}, nil)

// breakerCollector reads the breakers' states when scraped.
type breakerCollector struct{ states func() map[string]int }

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- breakersDesc }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.states == nil {
		return
	}
	for state, n := range c.states() {
		ch <- prometheus.MustNewConstMetric(breakersDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// Temporal is the handler the site's Temporal client records the SDK's
// metrics with (client.Options.MetricsHandler).
func (m *Site) Temporal() client.MetricsHandler { return sdkHandler{m: m.sdk} }

// BMCCall counts a call to a BMC through driver: call is the command kind,
// outcome "ok" or the error kind.
func (m *Site) BMCCall(driver, call, outcome string, took time.Duration) {
	if m != nil {
		m.BMCCalls.WithLabelValues(driver, call, outcome).Inc()
		m.BMCDuration.WithLabelValues(driver, call).Observe(took.Seconds())
	}
}

// ImageWrote counts the bytes a deploy.image wrote.
func (m *Site) ImageWrote(bytes int64) {
	if m != nil {
		m.ImageWritten.Add(float64(bytes))
	}
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Site) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// PXERequest counts a proxy-DHCP request's outcome.
func (m *Site) PXERequest(outcome string) {
	if m != nil {
		m.PXE.WithLabelValues(outcome).Inc()
	}
}

// Milestone counts a boot reaching a milestone.
func (m *Site) Milestone(name string) {
	if m != nil {
		m.Milestones.WithLabelValues(name).Inc()
	}
}

// CacheLookup counts an image asked of the cache, and the bytes a miss
// fetched.
func (m *Site) CacheLookup(hit bool, fetched int64) {
	if m == nil {
		return
	}
	result := "miss"
	if hit {
		result = "hit"
	}
	m.CacheLookups.WithLabelValues(result).Inc()
	m.CacheBytes.Add(float64(fetched))
}

// RelayedCommand counts a command relayed to a ramdisk.
func (m *Site) RelayedCommand(kind, outcome string) {
	if m != nil {
		m.Relayed.WithLabelValues(kind, outcome).Inc()
	}
}
