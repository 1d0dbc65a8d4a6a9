package api

import (
	"context"
	"fmt"
	"slices"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/store"
)

// Announce records what a site's running agent can do (its BMC drivers),
// which enroll checks before a node exists.
func (s join) Announce(ctx context.Context, r *connect.Request[v1.AnnounceRequest]) (*connect.Response[v1.AnnounceResponse], error) {
	site, err := s.a.sitePeer(ctx, "announces itself")
	if err != nil {
		return nil, err
	}
	drivers := slices.Clone(r.Msg.BmcDrivers)
	for i, d := range drivers {
		if d != bmc.DriverRedfish && d != bmc.DriverIPMI {
			return nil, errs.Invalid(fmt.Sprintf("bmcDrivers[%d]", i), "unknown BMC driver %s: redfish or ipmi", quote(d))
		}
	}
	slices.Sort(drivers)
	if err := s.store.SetSiteBMCDrivers(ctx, site, slices.Compact(drivers)); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "site agent announced", "site", site, "bmcDrivers", drivers)
	return connect.NewResponse(&v1.AnnounceResponse{}), nil
}

// checkSiteDriver refuses a node whose BMC driver the site's agent said it
// lacks, before anything is written; a site whose agent never announced
// (none yet, or one from before) is not checked.
func checkSiteDriver(site store.Site, driver string) error {
	if len(site.BMCDrivers) == 0 || slices.Contains(site.BMCDrivers, driver) {
		return nil
	}
	e := errs.New(errs.Unsupported, "site %s's agent has no %s BMC driver (it has %v): run a site agent built with it, or enroll the machine on another site",
		site.ID, driver, site.BMCDrivers)
	e.Field = "bmc.driver"
	return e
}
