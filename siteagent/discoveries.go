package siteagent

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/siteagent/boot"
)

// Reporting of PXE discoveries: the boot table records every sighting of
// an unknown MAC (proxy DHCP, or a script request) and persists it; the
// reporter sends each MAC's whole record to the control plane whenever it
// changed since the control plane last acknowledged it. A report carries
// absolute values, so one sent twice changes nothing there; a control
// plane that is down is retried with backoff, and an agent that restarts
// sends its table once again.

// reportBatch is how many MACs go in one report (the API takes 256).
const reportBatch = 256

// Report retry backoff.
const (
	reportRetryMin = time.Second
	reportRetryMax = 30 * time.Second
)

// reporter sends the table's discoveries to the control plane.
type reporter struct {
	table *boot.Table
	c     bettercomputev1connect.DiscoveriesServiceClient
	log   *slog.Logger
	acked map[string]boot.Discovery // what the control plane has, by MAC
}

func newReporter(table *boot.Table, hc *http.Client, baseURL string, log *slog.Logger) *reporter {
	return &reporter{table: table, c: bettercomputev1connect.NewDiscoveriesServiceClient(hc, baseURL), log: log,
		acked: map[string]boot.Discovery{}}
}

// run reports until ctx ends: at once, then after each change, and again
// with backoff while the control plane does not acknowledge.
func (r *reporter) run(ctx context.Context) {
	retry := reportRetryMin
	for {
		var again <-chan time.Time
		if err := r.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("cannot report PXE discoveries to the control plane; retrying", "in", retry, "err", err)
			again, retry = time.After(retry), min(2*retry, reportRetryMax)
		} else {
			retry = reportRetryMin
		}
		select {
		case <-ctx.Done():
			return
		case <-r.table.DiscoveriesChanged():
		case <-again:
		}
	}
}

// flush sends every discovery not yet acknowledged as it is now.
func (r *reporter) flush(ctx context.Context) error {
	var pending []boot.Discovery
	table := r.table.Discoveries()
	present := make(map[string]bool, len(table))
	for _, d := range table {
		present[d.MAC] = true
		if a, ok := r.acked[d.MAC]; !ok || !sameDiscovery(a, d) {
			pending = append(pending, d)
		}
	}
	for mac := range r.acked { // evicted from the table
		if !present[mac] {
			delete(r.acked, mac)
		}
	}
	for len(pending) > 0 {
		batch := pending[:min(len(pending), reportBatch)]
		items := make([]*v1.DiscoverySighting, 0, len(batch))
		for _, d := range batch {
			items = append(items, &v1.DiscoverySighting{Mac: d.MAC, ClientUuid: d.ClientUUID, Arch: d.Arch,
				FirstSeen: timestamppb.New(d.FirstSeen), LastSeen: timestamppb.New(d.LastSeen), Count: int64(d.Count)})
		}
		if _, err := r.c.Report(ctx, connect.NewRequest(&v1.ReportDiscoveriesRequest{Items: items})); err != nil {
			return err
		}
		for _, d := range batch {
			r.acked[d.MAC] = d
		}
		r.log.Debug("PXE discoveries reported", "macs", len(batch))
		pending = pending[len(batch):]
	}
	return nil
}

func sameDiscovery(a, b boot.Discovery) bool {
	return a.Count == b.Count && a.LastSeen.Equal(b.LastSeen) && a.FirstSeen.Equal(b.FirstSeen) &&
		a.ClientUUID == b.ClientUUID && a.Arch == b.Arch
}

// startReporting runs the reporter until Stop.
func (a *Agent) startReporting() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopReporting, a.reportingDone = cancel, make(chan struct{})
	r := newReporter(a.boot, a.cp, a.cfg.ControlPlaneURL, a.log)
	go func() {
		defer close(a.reportingDone)
		r.run(ctx)
	}()
}
