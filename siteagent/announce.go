package siteagent

import (
	"context"
	"encoding/json"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/activities/site"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// announce tells the control plane what this agent can do: its BMC
// drivers, so enroll refuses a node the site cannot drive before it
// exists, and the steps it serves, so a profile naming a step this site
// cannot run is refused before its workflow starts.
func (a *Agent) announce(ctx context.Context) error {
	drivers := make([]string, 0, len(a.cfg.Drivers))
	for name := range a.cfg.Drivers {
		drivers = append(drivers, name)
	}
	slices.Sort(drivers)
	served, err := servedSteps(a.cfg.Plugins)
	if err != nil {
		return err
	}
	jc := bettercomputev1connect.NewJoinServiceClient(a.cp, a.cfg.ControlPlaneURL)
	if _, err := jc.Announce(ctx, connect.NewRequest(&v1.AnnounceRequest{BmcDrivers: drivers, Steps: served})); err != nil {
		return site.FromConnect("site.announce", err)
	}
	a.log.Info("announced to the control plane", "bmcDrivers", drivers, "steps", len(served))
	return nil
}

// servedSteps describes the steps a site agent with plugins serves: those
// of the built-ins and the plugins that run on the site or are relayed to
// the ramdisk (the control plane's worker publishes its own).
func servedSteps(plugins []sdk.Plugin) ([]*structpb.Struct, error) {
	reg, err := steps.Registry(plugins...)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "the site agent's plugins")
	}
	var out []*structpb.Struct
	for _, s := range reg.Steps() {
		if s.RunsOn == sdk.ControlPlane {
			continue
		}
		b, err := json.Marshal(s.Describe())
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "describe step %s", s.ID)
		}
		d := &structpb.Struct{}
		if err := d.UnmarshalJSON(b); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "describe step %s", s.ID)
		}
		out = append(out, d)
	}
	return out, nil
}
