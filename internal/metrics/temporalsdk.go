package metrics

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// sdkTimerBuckets span a poll answered at once to a long activity: 1 ms to
// about 4.4 minutes.
var sdkTimerBuckets = prometheus.ExponentialBuckets(0.001, 4, 10)

// sdkMetrics holds what the Temporal SDK recorded through its
// client.MetricsHandler, under the SDK's names: counters get _total, timers
// become _seconds histograms. The SDK gives one name different tag sets
// (a poll's, a task's), which a Prometheus family cannot have, so the
// collector gives every series of a name the union of its label names,
// empty where a series has none (Prometheus reads an empty label as
// absent).
type sdkMetrics struct {
	mu     sync.Mutex
	series map[string]*sdkSeries // by name and tags
}

type sdkSeries struct {
	name    string
	kind    prometheus.ValueType // counter, gauge, or untyped for a timer's histogram
	labels  map[string]string
	value   float64
	buckets []uint64 // per sdkTimerBuckets upper bound, not cumulative
	count   uint64
}

func newSDKMetrics() *sdkMetrics { return &sdkMetrics{series: map[string]*sdkSeries{}} }

// sdkHandler is a client.MetricsHandler with its tags.
type sdkHandler struct {
	m    *sdkMetrics
	tags map[string]string
}

var _ client.MetricsHandler = sdkHandler{}

func (h sdkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range tags {
		merged[labelName(k)] = v
	}
	return sdkHandler{m: h.m, tags: merged}
}

func (h sdkHandler) Counter(name string) client.MetricsCounter {
	s := h.m.get(promName(name, "_total"), prometheus.CounterValue, h.tags)
	return metricFunc(func(v float64) { h.m.update(func() { s.value += v }) })
}

func (h sdkHandler) Gauge(name string) client.MetricsGauge {
	s := h.m.get(promName(name, ""), prometheus.GaugeValue, h.tags)
	return metricFunc(func(v float64) { h.m.update(func() { s.value = v }) })
}

func (h sdkHandler) Timer(name string) client.MetricsTimer {
	s := h.m.get(promName(name, "_seconds"), prometheus.UntypedValue, h.tags)
	return metricFunc(func(sec float64) {
		i, _ := slices.BinarySearch(sdkTimerBuckets, sec)
		h.m.update(func() {
			if i < len(s.buckets) {
				s.buckets[i]++
			}
			s.count++
			s.value += sec
		})
	})
}

// metricFunc is the SDK's counter, gauge and timer in one.
type metricFunc func(float64)

func (f metricFunc) Inc(d int64)               { f(float64(d)) }
func (f metricFunc) Update(v float64)          { f(v) }
func (f metricFunc) Record(took time.Duration) { f(took.Seconds()) }

// get returns the series of name and tags, made on first use.
func (m *sdkMetrics) get(name string, kind prometheus.ValueType, tags map[string]string) *sdkSeries {
	var key strings.Builder
	key.WriteString(name)
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		key.WriteString("\x00" + k + "=" + tags[k])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.series[key.String()]
	if s == nil {
		s = &sdkSeries{name: name, kind: kind, labels: tags}
		if kind == prometheus.UntypedValue {
			s.buckets = make([]uint64, len(sdkTimerBuckets))
		}
		m.series[key.String()] = s
	}
	return s
}

func (m *sdkMetrics) update(f func()) {
	m.mu.Lock()
	f()
	m.mu.Unlock()
}

// Describe describes nothing: the SDK's names are known only once used, so
// the registry takes this collector unchecked.
func (m *sdkMetrics) Describe(chan<- *prometheus.Desc) {}

func (m *sdkMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byName := map[string][]*sdkSeries{}
	for _, s := range m.series {
		byName[s.name] = append(byName[s.name], s)
	}
	for name, all := range byName {
		union := map[string]bool{}
		for _, s := range all {
			for k := range s.labels {
				union[k] = true
			}
		}
		names := slices.Sorted(maps.Keys(union))
		desc := prometheus.NewDesc(name, "Temporal SDK metric "+name+".", names, nil)
		for _, s := range all {
			values := make([]string, len(names))
			for i, k := range names {
				values[i] = s.labels[k]
			}
			ch <- s.metric(desc, values)
		}
	}
}

func (s *sdkSeries) metric(desc *prometheus.Desc, values []string) prometheus.Metric {
	if s.kind != prometheus.UntypedValue {
		return prometheus.MustNewConstMetric(desc, s.kind, s.value, values...)
	}
	cumulative := map[float64]uint64{}
	var n uint64
	for i, le := range sdkTimerBuckets {
		n += s.buckets[i]
		cumulative[le] = n
	}
	return prometheus.MustNewConstHistogram(desc, s.count, s.value, cumulative, values...)
}

// promName is the SDK's metric name as Prometheus names it: only
// [a-zA-Z0-9_], ending in suffix.
func promName(name, suffix string) string {
	name = labelName(name)
	if !strings.HasSuffix(name, suffix) {
		name += suffix
	}
	return name
}

// labelName replaces what a Prometheus name may not hold with "_".
func labelName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
