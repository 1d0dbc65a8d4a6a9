package metrics

import (
	"errors"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// merged gathers gs as one: families of the same name and type from
// several gatherers (the embedded Temporal server's own SDK clients use the
// SDK's names too) are served as one family with the first one's help,
// where prometheus.Gatherers would refuse them for their help text. A
// family of the same name and another type is left out, with an error.
func merged(gs []prometheus.Gatherer) prometheus.GathererFunc {
	return func() ([]*dto.MetricFamily, error) {
		byName := map[string]*dto.MetricFamily{}
		var errList []error
		for _, g := range gs {
			fams, err := g.Gather()
			if err != nil {
				errList = append(errList, err)
			}
			for _, f := range fams {
				have := byName[f.GetName()]
				switch {
				case have == nil:
					byName[f.GetName()] = f
				case have.GetType() == f.GetType():
					have.Metric = append(have.Metric, f.Metric...)
				default:
					errList = append(errList, errors.New("metric family "+f.GetName()+" gathered twice with different types"))
				}
			}
		}
		out := make([]*dto.MetricFamily, 0, len(byName))
		for _, f := range byName {
			out = append(out, f)
		}
		slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
		return out, errors.Join(errList...)
	}
}
