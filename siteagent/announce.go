package siteagent

import (
	"context"
	"slices"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/activities/site"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// announce tells the control plane what this agent can do (its BMC
// drivers), so enroll refuses a node the site cannot drive before it
// exists.
func (a *Agent) announce(ctx context.Context) error {
	drivers := make([]string, 0, len(a.cfg.Drivers))
	for name := range a.cfg.Drivers {
		drivers = append(drivers, name)
	}
	slices.Sort(drivers)
	jc := bettercomputev1connect.NewJoinServiceClient(a.cp, a.cfg.ControlPlaneURL)
	if _, err := jc.Announce(ctx, connect.NewRequest(&v1.AnnounceRequest{BmcDrivers: drivers})); err != nil {
		return site.FromConnect("site.announce", err)
	}
	a.log.Info("announced to the control plane", "bmcDrivers", drivers)
	return nil
}
