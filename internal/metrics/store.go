package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreCounts reads what the store holds, once a scrape.
type StoreCounts func(ctx context.Context) (Counts, error)

// Counts is what the store holds that the metrics show.
type Counts struct {
	Nodes  map[NodeGroup]int     // nodes, by state and pool
	Tokens map[string]TokenCount // join tokens, by kind (site, disc, prov)
}

// NodeGroup is a state and a pool.
type NodeGroup struct{ State, Pool string }

// TokenCount counts the join tokens of one kind.
type TokenCount struct {
	Issued  int // ever made (tokens are kept, used or not)
	Used    int // admitted an agent: a certificate was issued on them
	Expired int // never used, and past their expiry
}

var (
	nodesDesc = prometheus.NewDesc("better_compute_nodes", "Nodes per state and pool, across tenants.",
		[]string{"state", "pool"}, nil)
	tokensIssuedDesc = prometheus.NewDesc("better_compute_join_tokens_issued_total",
		"Join tokens issued, by kind (site, disc: a ramdisk boot's, prov: an installed OS's).", []string{"kind"}, nil)
	tokensUsedDesc = prometheus.NewDesc("better_compute_join_tokens_used_total",
		"Join tokens that admitted an agent, by kind.", []string{"kind"}, nil)
	tokensExpiredDesc = prometheus.NewDesc("better_compute_join_tokens_expired",
		"Join tokens never used and past their expiry, by kind.", []string{"kind"}, nil)
)

// storeCollector reads the counts when scraped, so they are the store's
// truth and not a tally that drifts or restarts with the process. The
// tokens' counters come from rows that are never deleted, so they only
// grow.
type storeCollector struct{ counts StoreCounts }

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodesDesc, tokensIssuedDesc, tokensUsedDesc, tokensExpiredDesc} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(nodesDesc, err)
		return
	}
	for g, n := range counts.Nodes {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), g.State, g.Pool)
	}
	for kind, t := range counts.Tokens {
		ch <- prometheus.MustNewConstMetric(tokensIssuedDesc, prometheus.CounterValue, float64(t.Issued), kind)
		ch <- prometheus.MustNewConstMetric(tokensUsedDesc, prometheus.CounterValue, float64(t.Used), kind)
		ch <- prometheus.MustNewConstMetric(tokensExpiredDesc, prometheus.GaugeValue, float64(t.Expired), kind)
	}
}
