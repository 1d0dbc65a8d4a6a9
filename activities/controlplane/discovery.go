package controlplane

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// findPoll is how often discovery.findCandidate reads the store.
const findPoll = 2 * time.Second

// BeginMACWait starts the node's wait for its MAC and returns when it
// began, by the database's clock.
func (a *Activities) BeginMACWait(ctx context.Context, in kinds.MACWaitInput) (time.Time, error) {
	since, err := a.Store.BeginMACWait(ctx, in.TenantID, in.NodeID)
	return since, errs.ToTemporal(err)
}

// FindCandidate polls the store until a MAC was heard of PXE-booting under
// the node's product UUID since the wait began, or the deadline passes
// (Found false). It heartbeats, so a control plane that dies is noticed and
// the retry goes on to the same deadline.
func (a *Activities) FindCandidate(ctx context.Context, in kinds.MACWaitInput) (kinds.Candidate, error) {
	uuids := kinds.UUIDForms(in.ProductUUID)
	for {
		d, ok, err := a.Store.FindCandidate(ctx, in.TenantID, in.SiteID, uuids, in.Since)
		if err != nil {
			return kinds.Candidate{}, errs.ToTemporal(err)
		}
		if ok {
			return kinds.Candidate{Found: true, MAC: d.MAC, ClientUUID: d.ClientUUID, Arch: d.Arch, FirstSeen: d.FirstSeen}, nil
		}
		if !a.now().Before(in.Deadline) {
			return kinds.Candidate{}, nil
		}
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return kinds.Candidate{}, ctx.Err()
		case <-time.After(findPoll):
		}
	}
}

// AwaitConfirmation records the candidate: the node now waits for an
// operator to confirm a MAC.
func (a *Activities) AwaitConfirmation(ctx context.Context, in kinds.MACWaitInput) error {
	return errs.ToTemporal(a.Store.AwaitConfirmation(ctx, in.TenantID, in.NodeID, in.MAC))
}

// TakeCandidate binds the candidate to the node at once (a pool that
// trusts its provisioning network) and returns the node's MACs. Retried
// after it committed, it finds the MAC bound already.
func (a *Activities) TakeCandidate(ctx context.Context, in kinds.MACWaitInput) ([]string, error) {
	n, err := a.Store.ConfirmMAC(ctx, in.TenantID, in.NodeID, in.MAC, store.WaitPXEDiscovery)
	if errs.Is(err, errs.InvalidState) {
		if got, gerr := a.Store.GetNode(ctx, in.TenantID, in.NodeID); gerr == nil && len(got.MACs) == 1 && got.MACs[0] == in.MAC {
			return got.MACs, nil
		}
	}
	if err != nil {
		return nil, errs.ToTemporal(err)
	}
	return n.MACs, nil
}

// EndMACWait forgets the node's wait.
func (a *Activities) EndMACWait(ctx context.Context, in kinds.MACWaitInput) error {
	return errs.ToTemporal(a.Store.EndMACWait(ctx, in.TenantID, in.NodeID))
}

// ForgetMAC unbinds a discovered MAC the node's ramdisk disowned.
func (a *Activities) ForgetMAC(ctx context.Context, in kinds.MACWaitInput) error {
	return errs.ToTemporal(a.Store.ForgetMAC(ctx, in.TenantID, in.NodeID, in.MAC))
}
