package controlplane

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/better-compute/better-compute/internal/metrics"
)

// DefaultMetricsListen is where serve exports /metrics unless told otherwise.
const DefaultMetricsListen = "127.0.0.1:9090"

// storeCounts reads what the metrics show of the store, across tenants:
// nodes per state and pool, and join tokens. Two read-only queries a
// scrape.
func (cp *ControlPlane) storeCounts(ctx context.Context) (metrics.Counts, error) {
	nodes, err := cp.nodeCounts(ctx)
	if err != nil {
		return metrics.Counts{}, err
	}
	tokens, err := cp.tokenCounts(ctx)
	return metrics.Counts{Nodes: nodes, Tokens: tokens}, err
}

func (cp *ControlPlane) nodeCounts(ctx context.Context) (map[metrics.NodeGroup]int, error) {
	rows, err := cp.store.Pool().Query(ctx, "SELECT state, pool_id, count(*) FROM metal_nodes GROUP BY state, pool_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[metrics.NodeGroup]int{}
	for rows.Next() {
		var g metrics.NodeGroup
		var n int
		if err := rows.Scan(&g.State, &g.Pool, &n); err != nil {
			return nil, err
		}
		out[g] = n
	}
	return out, rows.Err()
}

// tokenCounts counts site tokens beside the nodes' discovery and
// provisioned tokens: issued, used and expired. A token is used when a
// certificate was issued on it (revoking a node also marks its unused
// tokens used in the store, and those admitted nobody).
func (cp *ControlPlane) tokenCounts(ctx context.Context) (map[string]metrics.TokenCount, error) {
	rows, err := cp.store.Pool().Query(ctx, `
		SELECT t.kind, count(*), count(c.token_id), count(*) FILTER (WHERE t.used_at IS NULL AND t.expires_at <= now())
		FROM (SELECT 'site' AS kind, id, used_at, expires_at FROM site_tokens
			UNION ALL SELECT kind, id, used_at, expires_at FROM join_tokens) t
		LEFT JOIN (SELECT DISTINCT token_id FROM certificates) c ON c.token_id = t.id
		GROUP BY t.kind`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]metrics.TokenCount{}
	for rows.Next() {
		var kind string
		var t metrics.TokenCount
		if err := rows.Scan(&kind, &t.Issued, &t.Used, &t.Expired); err != nil {
			return nil, err
		}
		out[kind] = t
	}
	return out, rows.Err()
}

// startMetrics serves /metrics on cfg.MetricsListen unless it is "" or
// "off"; the registry exists either way, so the counters are always counted.
func (cp *ControlPlane) startMetrics() error {
	cp.metrics = metrics.NewControlPlane(cp.storeCounts, cp.log)
	if cp.ln.metrics == nil { // off (listen)
		return nil
	}
	ln := take(&cp.ln.metrics)
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

// temporalServerMetrics is the registry the embedded Temporal server
// records its own metrics into, served on the control plane's /metrics.
func (cp *ControlPlane) temporalServerMetrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	cp.metrics.Include(reg)
	return reg
}

// MetricsURL is where /metrics is served ("" when off).
func (cp *ControlPlane) MetricsURL() string { return cp.metricsURL }

// Metrics is this process's metrics.
func (cp *ControlPlane) Metrics() *metrics.ControlPlane { return cp.metrics }
