package controlplane

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/metrics"
)

// DefaultMetricsListen is where serve exports /metrics unless told otherwise.
const DefaultMetricsListen = "127.0.0.1:9090"

// nodeStates counts every tenant's nodes per state: one read-only query a
// scrape.
func (cp *ControlPlane) nodeStates(ctx context.Context) (map[string]int, error) {
	rows, err := cp.store.Pool().Query(ctx, "SELECT state, count(*) FROM metal_nodes GROUP BY state")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, err
		}
		out[state] = n
	}
	return out, rows.Err()
}

// startMetrics serves /metrics on cfg.MetricsListen unless it is "" or
// "off"; the registry exists either way, so the counters are always counted.
func (cp *ControlPlane) startMetrics() error {
	cp.metrics = metrics.NewControlPlane(cp.nodeStates, cp.log)
	if cp.cfg.MetricsListen == "" || cp.cfg.MetricsListen == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", cp.cfg.MetricsListen)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "/metrics cannot listen on %s (pick another with --metrics-listen, or off)", cp.cfg.MetricsListen)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", cp.metrics.Handler())
	cp.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	cp.metricsURL = "http://" + ln.Addr().String() + "/metrics"
	go func() {
		if err := cp.metricsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cp.log.Error("metrics server stopped", "err", err)
		}
	}()
	return nil
}

func (cp *ControlPlane) stopMetrics() {
	if cp.metricsSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = cp.metricsSrv.Shutdown(ctx)
		cancel()
		cp.metricsSrv = nil
	}
}

// MetricsURL is where /metrics is served ("" when off).
func (cp *ControlPlane) MetricsURL() string { return cp.metricsURL }

// Metrics is this process's metrics.
func (cp *ControlPlane) Metrics() *metrics.ControlPlane { return cp.metrics }
