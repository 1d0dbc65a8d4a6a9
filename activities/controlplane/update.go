package controlplane

import (
	"context"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// UpdateBMC is node.updateBMC: it saves the BMC settings metal.update
// checked against the BMC, if the node is still in the state it was.
func (a *Activities) UpdateBMC(ctx context.Context, in kinds.UpdateBMCInput) error {
	return errs.ToTemporal(a.Store.UpdateNodeBMC(ctx, in.TenantID, in.NodeID, in.State,
		store.NodeBMC{Address: in.BMC.Address, Driver: in.BMC.Driver, CredentialsRef: in.BMC.CredentialsRef, TLS: in.BMC.TLS}))
}
