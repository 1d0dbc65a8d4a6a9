package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// metal.ensureRamdisk: a machine whose BMC reports no MAC (IPMI), enrolled
// with only its product UUID, is power-cycled into PXE with no boot entry;
// the site records its PXE requests as discoveries (with DHCP option 97,
// its UUID) and reports them; the MAC first seen under its UUID within
// DiscoveryWindow becomes its candidate. Nothing more is sent until an
// operator confirms a MAC (metal.confirmMac), or at once on a pool with
// policy.trustProvisioningNetwork. Either way the ramdisk that boots next
// must report the node's UUID and the MAC among its NICs before any disk
// is touched.

// MACConfirmedSignal wakes a workflow waiting for a MAC confirmation; the
// API sends it after metal.confirmMac bound the MAC in the store, which the
// workflow then reads (a lost signal only delays it to its next poll).
const MACConfirmedSignal = "macConfirmed"

// DiscoveryWindow is how long after the power cycle a MAC may first be
// seen under the node's product UUID.
const DiscoveryWindow = 10 * time.Minute

// ensureRamdisk finds the MAC of a node that has none, so bootRamdisk can
// give the machine a boot entry.
func (r *run) ensureRamdisk() (err error) {
	if r.node.ProductUUID == "" {
		return errs.New(errs.Unsupported, "node %s has no MAC and no product UUID: enroll it with --macs, or with "+
			"--product-uuid to find its MAC by PXE discovery", r.in.NodeID)
	}
	in := kinds.MACWaitInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, SiteID: r.node.SiteID, ProductUUID: r.node.ProductUUID}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActBeginMACWait, in).Get(r.ctx, &in.Since); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			r.endMACWait(in)
		}
	}()
	// With no entry the site answers the machine's PXE requests with nothing
	// and records them; the machine then boots whatever comes next.
	if _, err := r.send(kinds.BootClearEntry, kinds.ClearEntryInput{NodeID: r.in.NodeID}, nil); err != nil {
		return err
	}
	if err := r.bootDevice(bmc.BootPXE, false); err != nil {
		return err
	}
	if err := r.power(bmc.PowerCycle); err != nil {
		return err
	}
	in.Deadline = in.Since.Add(DiscoveryWindow)
	var c kinds.Candidate
	if err := workflow.ExecuteActivity(r.findOptions(), kinds.ActFindCandidate, in).Get(r.ctx, &c); err != nil {
		return err
	}
	if !c.Found {
		return errs.New(errs.Unavailable, "no machine PXE-booted under product UUID %s on site %s within %s of the power "+
			"cycle: check that it boots from the network first, its VLAN and cabling, and that bcd site answers PXE "+
			"there (--pxe-interface); then `metal recover %s`", r.node.ProductUUID, r.node.SiteID, DiscoveryWindow, r.in.NodeID)
	}
	in.MAC = c.MAC
	macs, err := r.bindMAC(in)
	if err != nil {
		return err
	}
	r.node.MACs, r.discovered = macs, macs[0]
	return nil
}

// bindMAC takes the candidate at once on a pool that trusts its
// provisioning network, and otherwise waits for an operator to confirm a
// MAC; it returns the node's MACs.
func (r *run) bindMAC(in kinds.MACWaitInput) ([]string, error) {
	log := workflow.GetLogger(r.ctx)
	if r.node.TrustProvisioningNetwork {
		var macs []string
		if err := workflow.ExecuteActivity(r.cp(), kinds.ActTakeCandidate, in).Get(r.ctx, &macs); err != nil {
			return nil, err
		}
		log.Info("PXE discovery: candidate taken (trustProvisioningNetwork)", "node", r.in.NodeID, "mac", in.MAC)
		return macs, nil
	}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActAwaitConfirmation, in).Get(r.ctx, nil); err != nil {
		return nil, err
	}
	log.Info("PXE discovery: waiting for a MAC confirmation", "node", r.in.NodeID, "candidate", in.MAC)
	return r.awaitConfirmation()
}

// awaitConfirmation waits until the node has a MAC: it reads the node when
// metal.confirmMac signals, and on its own every minute, then less often
// (up to hourly), so a long wait keeps its history short.
func (r *run) awaitConfirmation() ([]string, error) {
	ch := workflow.GetSignalChannel(r.ctx, MACConfirmedSignal)
	for wait := time.Minute; ; wait = min(2*wait, time.Hour) {
		tctx, cancel := workflow.WithCancel(r.ctx)
		sel := workflow.NewSelector(r.ctx)
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
			var mac string
			c.Receive(r.ctx, &mac)
		})
		sel.AddFuture(workflow.NewTimer(tctx, wait), func(workflow.Future) {})
		sel.Select(r.ctx)
		cancel()
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		var n kinds.NodeInfo
		if err := workflow.ExecuteActivity(r.cp(), kinds.ActGetNode, r.in).Get(r.ctx, &n); err != nil {
			return nil, err
		}
		if len(n.MACs) > 0 {
			return n.MACs, nil
		}
	}
}

// findOptions are discovery.findCandidate's: it runs the whole window,
// heartbeating, and a retry goes on to the same deadline. The run's
// command log is made durable first (flush): the wait can be long.
func (r *run) findOptions() workflow.Context {
	r.flush()
	return workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		TaskQueue:           ControlPlaneQueue,
		StartToCloseTimeout: DiscoveryWindow + time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 10, NonRetryableErrorTypes: errs.FinalKinds()},
	})
}

// endMACWait forgets the node's wait when the workflow gives up, even
// when it was cancelled (metal.abort).
func (r *run) endMACWait(in kinds.MACWaitInput) {
	r.flush()
	if err := r.atEnd(kinds.ActEndMACWait, 10, in); err != nil {
		workflow.GetLogger(r.ctx).Error("could not end the node's MAC wait", "node", r.in.NodeID, "err", err)
	}
}

// machineIdentity is what inventory.refresh says of who the machine is.
type machineIdentity struct {
	ProductUUID string `json:"productUuid"`
	NICs        []struct {
		MAC string `json:"mac"`
	} `json:"nics"`
}

// checkDiscovered refuses a ramdisk, booted from a MAC found by PXE
// discovery, that is not the node's machine, before anything is recorded
// or wiped; the node then forgets the MAC, so `metal recover` looks again.
func (r *run) checkDiscovered(inventory json.RawMessage) error {
	if r.discovered == "" {
		return nil
	}
	err := r.identify(inventory)
	if err != nil {
		in := kinds.MACWaitInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, SiteID: r.node.SiteID, MAC: r.discovered}
		if ferr := workflow.ExecuteActivity(r.cp(), kinds.ActForgetMAC, in).Get(r.ctx, nil); ferr != nil {
			workflow.GetLogger(r.ctx).Error("could not unbind the discovered MAC", "node", r.in.NodeID, "err", ferr)
		}
	}
	return err
}

// identify checks that the inventory is the node's machine: it must report
// the node's product UUID (in either byte order) and the discovered MAC
// among its NICs.
func (r *run) identify(inventory json.RawMessage) error {
	var id machineIdentity
	if err := json.Unmarshal(inventory, &id); err != nil {
		return fmt.Errorf("inventory.refresh result: %w", err)
	}
	var nics []string
	for _, n := range id.NICs {
		nics = append(nics, strings.ToLower(n.MAC))
	}
	switch {
	case !slices.Contains(kinds.UUIDForms(r.node.ProductUUID), strings.ToLower(id.ProductUUID)):
		return errs.New(errs.InvalidState, "the machine that booted from %s (found by PXE discovery) reports product "+
			"UUID %q, not node %s's %s: it is another machine; nothing was written and the node forgot that MAC, so "+
			"`metal recover` looks for its own again", r.discovered, id.ProductUUID, r.in.NodeID, r.node.ProductUUID)
	case !slices.Contains(nics, r.discovered):
		return errs.New(errs.InvalidState, "the ramdisk of node %s reports NICs %v, without %s, the MAC found by PXE "+
			"discovery: nothing was written and the node forgot that MAC; check the discovery (`metal discovered`)", r.in.NodeID, nics, r.discovered)
	}
	return nil
}
