package fakecp

import (
	"context"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
)

// Discoveries is the DiscoveriesService of the fake control plane: it
// keeps every report a verified site agent sends.
type Discoveries struct {
	// Refuse makes Report fail UNAVAILABLE, as a control plane that is down.
	Refuse  atomic.Bool
	mu      sync.Mutex
	reports [][]*v1.DiscoverySighting
}

// Report records one report.
func (d *Discoveries) Report(_ context.Context, req *connect.Request[v1.ReportDiscoveriesRequest]) (*connect.Response[v1.ReportDiscoveriesResponse], error) {
	if d.Refuse.Load() {
		return nil, connect.NewError(connect.CodeUnavailable, errs.New(errs.Unavailable, "the control plane is restarting"))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reports = append(d.reports, req.Msg.GetItems())
	return connect.NewResponse(&v1.ReportDiscoveriesResponse{}), nil
}

// Reports returns the reports received, in order.
func (d *Discoveries) Reports() [][]*v1.DiscoverySighting {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]*v1.DiscoverySighting(nil), d.reports...)
}
