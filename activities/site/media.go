package site

import (
	"context"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// MediaInsert is media.insert: the ISO at in.URL on the BMC's virtual
// media, booted from once at the machine's next boot.
func (a *Activities) MediaInsert(ctx context.Context, in kinds.MediaInsertInput) error {
	if _, err := bmc.ParseMediaURL("url", in.URL); err != nil {
		return toTemporal(withOp(err, kinds.MediaInsert))
	}
	err := a.withMedia(ctx, kinds.MediaInsert, in.BMC, func(m bmc.Media) error { return m.InsertMedia(ctx, in.URL) })
	if err == nil {
		a.log().InfoContext(ctx, "virtual media inserted", "node", in.BMC.NodeID, "url", in.URL)
	}
	return toTemporal(err)
}

// MediaEject is media.eject: the BMC's virtual media emptied.
func (a *Activities) MediaEject(ctx context.Context, in kinds.MediaEjectInput) error {
	err := a.withMedia(ctx, kinds.MediaEject, in.BMC, func(m bmc.Media) error { return m.EjectMedia(ctx) })
	if err == nil {
		a.log().InfoContext(ctx, "virtual media ejected", "node", in.BMC.NodeID)
	}
	return toTemporal(err)
}

// withMedia runs fn on the target's driver, or fails UNSUPPORTED, final,
// before anything is sent when the driver has no virtual media (IPMI).
func (a *Activities) withMedia(ctx context.Context, op string, t kinds.BMCTarget, fn func(bmc.Media) error) error {
	return a.withDriver(ctx, op, t, func(d bmc.Driver) error {
		m, ok := d.(bmc.Media)
		if !ok {
			return errs.New(errs.Unsupported, "the %s driver has no virtual media: boot this machine from the network (iPXE sanboot of a catalog ISO) instead", t.Driver)
		}
		return fn(m)
	})
}
