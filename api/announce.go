package api

import (
	"context"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// Announce records what a site's running agent can do: its BMC drivers,
// which enroll checks before a node exists, and the steps it serves, which
// profiles are resolved against (replacing those it announced before).
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
	steps, err := siteSteps(r.Msg.Steps)
	if err != nil {
		return nil, err
	}
	if err := s.store.SetSiteBMCDrivers(ctx, site, slices.Compact(drivers)); err != nil {
		return nil, err
	}
	if err := s.store.PublishSteps(ctx, site, "", steps); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "site agent announced", "site", site, "bmcDrivers", drivers, "steps", len(steps))
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

// maxSteps bounds the steps one worker publishes.
const maxSteps = 256

// siteSteps checks the steps a site agent announced: each a descriptor that
// would register (sdk.DecodeDescriptor), run on the site or relayed to the
// ramdisk, announced once.
func siteSteps(in []*structpb.Struct) ([]sdk.Step, error) {
	if len(in) > maxSteps {
		return nil, errs.Invalid("steps", "at most %d steps, got %d", maxSteps, len(in))
	}
	out := make([]sdk.Step, 0, len(in))
	seen := map[string]bool{}
	for i, st := range in {
		f := fmt.Sprintf("steps[%d]", i)
		b, err := st.MarshalJSON()
		if err != nil {
			return nil, errs.Invalid(f, "the step descriptor does not encode: %v", err)
		}
		step, err := sdk.DecodeDescriptor(b)
		switch {
		case err != nil:
			return nil, errs.Invalid(f, "%v", err)
		case step.RunsOn == sdk.ControlPlane:
			return nil, errs.Invalid(f+".runsOn", "step %s runs on the control plane, which a site agent does not serve", step.ID)
		case seen[step.ID]:
			return nil, errs.Invalid(f+".id", "step %s is announced twice", step.ID)
		}
		seen[step.ID] = true
		out = append(out, step)
	}
	return out, nil
}
