package metrics

import (
	"encoding/binary"
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
//
// The SDK asks for its instruments afresh each time it records (tags
// added, then the instrument looked up, thousands of times a lifecycle
// loop), so both are kept: a tag set's children by the tags added, its
// instruments by name. Recording is then two map lookups and no
// allocation (BenchmarkTemporalSDKHandler).
type sdkMetrics struct {
	mu     sync.Mutex
	series map[string]*sdkSeries // by name and tags
	root   *tagSet
}

type sdkSeries struct {
	name    string
	kind    prometheus.ValueType // counter, gauge, or untyped for a timer's histogram
	labels  map[string]string
	value   float64
	buckets []uint64 // per sdkTimerBuckets upper bound, not cumulative
	count   uint64
}

// tagSet is one set of tags the SDK made with WithTags, with what was
// made from it. Guarded by sdkMetrics.mu.
type tagSet struct {
	labels      map[string]string // label names made Prometheus's
	key         string            // the labels, sorted by name, as tagsKey writes them
	children    map[string]*tagSet
	instruments map[instrumentKey]*sdkInstrument
	handler     client.MetricsHandler // sdkHandler{tags: this}, made once
}

type instrumentKey struct {
	name string
	kind prometheus.ValueType
}

func newSDKMetrics() *sdkMetrics {
	return &sdkMetrics{series: map[string]*sdkSeries{}, root: newTagSet(map[string]string{})}
}

func newTagSet(labels map[string]string) *tagSet {
	return &tagSet{labels: labels, key: string(tagsKey(nil, labels)), children: map[string]*tagSet{},
		instruments: map[instrumentKey]*sdkInstrument{}}
}

// tagsKey appends tags to b sorted by name, each name and value after its
// length, so that no two tag sets write the same key whatever their
// values hold.
func tagsKey(b []byte, tags map[string]string) []byte {
	var keysBuf [4]string // on the stack for the few tags the SDK passes
	keys := keysBuf[:0]
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(binary.AppendUvarint(b, uint64(len(k))), k...)
		b = append(binary.AppendUvarint(b, uint64(len(tags[k]))), tags[k]...)
	}
	return b
}

// sdkHandler is a client.MetricsHandler with its tags.
type sdkHandler struct {
	m    *sdkMetrics
	tags *tagSet // nil: the root's
}

var _ client.MetricsHandler = sdkHandler{}

func (h sdkHandler) set() *tagSet {
	if h.tags == nil {
		return h.m.root
	}
	return h.tags
}

func (h sdkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	if len(tags) == 0 {
		return h
	}
	// The tags as given are the child's key, built on the stack: a tag set
	// made before costs no allocation.
	var addedBuf [256]byte
	added := tagsKey(addedBuf[:0], tags)
	parent := h.set()
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	child := parent.children[string(added)]
	if child == nil {
		merged := maps.Clone(parent.labels)
		for k, v := range tags {
			merged[labelName(k)] = v
		}
		child = newTagSet(merged)
		child.handler = sdkHandler{m: h.m, tags: child}
		parent.children[string(added)] = child
	}
	return child.handler
}

func (h sdkHandler) Counter(name string) client.MetricsCounter {
	return h.instrument(name, prometheus.CounterValue)
}

func (h sdkHandler) Gauge(name string) client.MetricsGauge {
	return h.instrument(name, prometheus.GaugeValue)
}

func (h sdkHandler) Timer(name string) client.MetricsTimer {
	return h.instrument(name, prometheus.UntypedValue)
}

// instrument returns the tag set's instrument of name and kind, made (with
// its series) on first use.
func (h sdkHandler) instrument(name string, kind prometheus.ValueType) *sdkInstrument {
	ts := h.set()
	k := instrumentKey{name, kind}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if in := ts.instruments[k]; in != nil {
		return in
	}
	suffix := map[prometheus.ValueType]string{prometheus.CounterValue: "_total", prometheus.UntypedValue: "_seconds"}[kind]
	in := &sdkInstrument{m: h.m, s: h.m.seriesLocked(promName(name, suffix), kind, ts)}
	ts.instruments[k] = in
	return in
}

// sdkInstrument is the SDK's counter, gauge and timer in one: Inc adds,
// Update sets, Record observes seconds into the histogram.
type sdkInstrument struct {
	m *sdkMetrics
	s *sdkSeries
}

func (in *sdkInstrument) Inc(d int64) {
	in.m.mu.Lock()
	in.s.value += float64(d)
	in.m.mu.Unlock()
}

func (in *sdkInstrument) Update(v float64) {
	in.m.mu.Lock()
	in.s.value = v
	in.m.mu.Unlock()
}

func (in *sdkInstrument) Record(took time.Duration) {
	sec := took.Seconds()
	i, _ := slices.BinarySearch(sdkTimerBuckets, sec)
	in.m.mu.Lock()
	if i < len(in.s.buckets) {
		in.s.buckets[i]++
	}
	in.s.count++
	in.s.value += sec
	in.m.mu.Unlock()
}

// seriesLocked returns the series of name and ts's tags, made on first use
// (two tag sets made in different orders may name the same series).
func (m *sdkMetrics) seriesLocked(name string, kind prometheus.ValueType, ts *tagSet) *sdkSeries {
	key := name + ts.key
	s := m.series[key]
	if s == nil {
		s = &sdkSeries{name: name, kind: kind, labels: ts.labels}
		if kind == prometheus.UntypedValue {
			s.buckets = make([]uint64, len(sdkTimerBuckets))
		}
		m.series[key] = s
	}
	return s
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
