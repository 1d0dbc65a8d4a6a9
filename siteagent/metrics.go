package siteagent

import (
	"net"
	"net/http"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/metrics"
)

// listenMetrics binds /metrics unless addr is "" or "off"; a taken port
// stops the start.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" || addr == "off" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "/metrics cannot listen on %s (pick another with --metrics-listen, or off)", addr)
	}
	return ln, nil
}

// countInto has the agent's parts count into m: the boot table's
// milestones, the image cache, the relayed commands, the BMC calls, the
// image bytes written and the BMC breakers' states (proxy DHCP counts from
// its Config, set before it is bound; the Temporal client records into
// m.Temporal()).
func (a *Agent) countInto(m *metrics.Site) {
	a.metrics = m
	a.boot.CountMilestones(m.Milestone)
	a.cache.Count = m.CacheLookup
	a.acts.Relayed = m.RelayedCommand
	a.acts.BMCCalls = m.BMCCall
	a.acts.ImageWrote = m.ImageWrote
	if g := a.acts.BMCs; g != nil {
		m.CountBreakers(func() map[string]int { return g.Breakers(time.Now()) })
	}
}

// serveMetrics serves /metrics on ln, when there is one.
func (a *Agent) serveMetrics(ln net.Listener) {
	if ln == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.servers = append(a.servers, srv)
	a.metricsURL = "http://" + ln.Addr().String() + "/metrics"
	go func() {
		if err := srv.Serve(ln); serveErr(err) {
			a.fail(errs.Wrap(errs.Unavailable, err, "the metrics listener stopped"))
		}
	}()
}

// Metrics is the agent's metrics, counted whether or not they are served.
func (a *Agent) Metrics() *metrics.Site { return a.metrics }

// MetricsURL is where /metrics is served ("" when off).
func (a *Agent) MetricsURL() string { return a.metricsURL }
