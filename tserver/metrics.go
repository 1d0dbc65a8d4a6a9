package tserver

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/temporal"

	"github.com/better-compute/better-compute/errs"
)

// histogramBounds are the buckets of the server's histograms, per unit: the
// server records latencies in seconds, sizes in bytes, counts bare.
var histogramBounds = map[string][]float64{
	metrics.Seconds:       prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms to ~4.4 min
	metrics.Milliseconds:  prometheus.ExponentialBuckets(1, 4, 10),     // 1 ms to ~4.4 min
	metrics.Bytes:         prometheus.ExponentialBuckets(256, 4, 10),   // 256 B to 64 MiB
	metrics.Dimensionless: prometheus.ExponentialBuckets(1, 4, 9),      // 1 to 65536
}

// metricsOption has the server record its own metrics into reg, under the
// server's names (service_requests_total, persistence_latency_seconds, …,
// as Temporal's dashboards know them), through OpenTelemetry and its
// Prometheus exporter, as the server does with a prometheus listener of its
// own, but with no listener: whoever serves reg serves them.
func metricsOption(reg prometheus.Registerer) (temporal.ServerOption, error) {
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot export the Temporal server's metrics")
	}
	var views []sdkmetric.View
	for unit, bounds := range histogramBounds {
		views = append(views, sdkmetric.NewView(
			sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: unit},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: bounds}}))
	}
	p := newMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithView(views...)))
	h, err := metrics.NewOtelMetricsHandler(log.NewNoopLogger(), p, metrics.ClientConfig{}, true)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot record the Temporal server's metrics")
	}
	return temporal.WithCustomMetricsHandler(h), nil
}

// meterProvider is the server's metrics.OpenTelemetryProvider over an
// OpenTelemetry meter provider. The server asks for the meter on every
// counter and timer it records: the meter is looked up once, as the
// server's own provider does (asking the SDK each time cost about 7 ms of
// CPU a fleet-benchmark loop).
type meterProvider struct {
	p     *sdkmetric.MeterProvider
	meter metric.Meter
}

func newMeterProvider(p *sdkmetric.MeterProvider) meterProvider {
	return meterProvider{p: p, meter: p.Meter("temporal")}
}

func (m meterProvider) GetMeter() metric.Meter { return m.meter }

func (m meterProvider) Stop(logger log.Logger) {
	if err := m.p.Shutdown(context.Background()); err != nil {
		logger.Warn("the Temporal server's metrics did not stop cleanly", tag.Error(err))
	}
}
