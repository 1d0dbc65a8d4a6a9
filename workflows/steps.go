package workflows

import (
	"encoding/json"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/steps"
)

func (r *run) power(action bmc.PowerAction) error {
	_, err := r.send(kinds.PowerSetPower, kinds.SetPowerInput{BMC: r.bmc(), Action: action}, nil)
	return err
}

func (r *run) bootDevice(dev bmc.BootDevice, persistent bool) error {
	_, err := r.send(kinds.ManagementSetBootDevice, kinds.SetBootDeviceInput{BMC: r.bmc(), Device: dev, Persistent: persistent}, nil)
	return err
}

// needsRamdisk refuses machine-side work on a pool whose machines never run
// our agent.
func (r *run) needsRamdisk(what string) error {
	if r.node.Agent == kinds.AgentNone {
		return errs.New(errs.Unsupported, "%s needs the ramdisk, and pool %s runs no agent (agent: none)", what, r.node.PoolID)
	}
	return nil
}

// bootRamdisk makes the machine PXE-boot the ramdisk with a fresh
// single-use discovery token for this boot.
func (r *run) bootRamdisk() error {
	if len(r.node.MACs) == 0 { // enrolled by product UUID only: find its MAC first
		if err := r.ensureRamdisk(); err != nil {
			return err
		}
	}
	var token string
	in := kinds.DiscoveryInput{TenantID: r.in.TenantID, SiteID: r.node.SiteID, NodeID: r.in.NodeID,
		WorkflowID: r.info.WorkflowExecution.ID}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActIssueDiscovery, in).Get(r.ctx, &token); err != nil {
		return err
	}
	entry := kinds.BootEntry{NodeID: r.in.NodeID, MACs: r.node.MACs, Ramdisk: true, DiscoveryToken: token}
	if _, err := r.send(kinds.BootSetEntry, entry, nil); err != nil {
		return err
	}
	if err := r.bootDevice(bmc.BootPXE, false); err != nil {
		return err
	}
	return r.power(bmc.PowerCycle)
}

// startRamdisk boots the ramdisk and has it report the machine's disks,
// which every later wipe must cover.
func (r *run) startRamdisk() error { return r.withRamdisk(r.refreshInventory) }

// maxBoots bounds the ramdisk boots tried when they stall.
const maxBoots = 3

// withRamdisk boots the ramdisk and runs first, its first command. A boot
// the site agent saw stall (BOOT_STALLED: no PXE request, no script, no
// kernel, no join within its bound) is set up and power-cycled again, up to
// maxBoots boots; then the verb fails with where the last boot stopped and
// what to check.
func (r *run) withRamdisk(first func() error) error { return r.bootFrom(1, first) }

// bootFrom is withRamdisk counting boots from boot.
func (r *run) bootFrom(boot int, first func() error) error {
	for ; ; boot++ {
		if err := r.bootRamdisk(); err != nil {
			return err
		}
		err := first()
		if kindOf(err) != errs.BootStalled {
			return err
		}
		if boot == maxBoots {
			return errs.New(errs.BootStalled, "%d ramdisk boots stalled; the last: %s", boot, appMessage(err))
		}
		workflow.GetLogger(r.ctx).Warn("ramdisk boot stalled; booting it again", "node", r.in.NodeID, "boot", boot, "err", err)
	}
}

// ramdiskRestart is the workflow.GetVersion change id of booting the
// ramdisk again for a later command that failed BOOT_STALLED: histories
// from before failed the verb there.
const ramdiskRestart = "ramdisk-restart-boots-again"

// onRamdisk runs cmd, a command to the ramdisk already up. BOOT_STALLED
// (its ramdisk restarted mid-command: the machine PXE-booted again with
// this boot's spent single-use token, so the new ramdisk cannot join)
// boots the ramdisk again with a fresh token and resends cmd, up to
// maxBoots boots. A resend is a new step with a new command id, so no
// ramdisk boot is handed one command twice; cmd must be safe to run again
// on a fresh boot (deploy.image, disk.wipe).
func (r *run) onRamdisk(cmd func() error) error {
	err := cmd()
	if kindOf(err) != errs.BootStalled ||
		workflow.GetVersion(r.ctx, ramdiskRestart, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return err
	}
	workflow.GetLogger(r.ctx).Warn("ramdisk restarted or stalled mid-command; booting it again", "node", r.in.NodeID, "err", err)
	return r.bootFrom(2, cmd)
}

// appMessage is what the application error in err (an activity's failure)
// says after its kind, without Temporal's wrapping.
func appMessage(err error) string {
	msg := lastError(err)
	if _, rest, ok := strings.Cut(msg, string(kindOf(err))+": "); ok {
		return rest
	}
	return msg
}

// bootLocal makes later boots go to the local disk.
func (r *run) bootLocal() error {
	entry := kinds.BootEntry{NodeID: r.in.NodeID, MACs: r.node.MACs}
	if _, err := r.send(kinds.BootSetEntry, entry, nil); err != nil {
		return err
	}
	return r.bootDevice(bmc.BootDisk, true)
}

// shutDown powers the machine off and forgets its boot entry.
func (r *run) shutDown() error {
	if err := r.power(bmc.PowerOff); err != nil {
		return err
	}
	_, err := r.send(kinds.BootClearEntry, kinds.ClearEntryInput{NodeID: r.in.NodeID}, nil)
	return err
}

// inspectBMC reads what the BMC knows (MACs, UUID) and records it.
func (r *run) inspectBMC() error {
	var out kinds.InspectOutput
	if _, err := r.send(kinds.BMCInspect, kinds.InspectInput{BMC: r.bmc()}, &out); err != nil {
		return err
	}
	inv, _ := json.Marshal(out.Inventory)
	f := kinds.FactsInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, MACs: out.Inventory.MACs,
		ProductUUID: out.Inventory.ProductUUID, Inventory: inv}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActRecordFacts, f).Get(r.ctx, nil); err != nil {
		return err
	}
	if len(out.Inventory.MACs) > 0 {
		r.node.MACs = out.Inventory.MACs
	}
	if out.Inventory.ProductUUID != "" {
		r.node.ProductUUID = out.Inventory.ProductUUID
	}
	if len(r.node.MACs) == 0 && r.node.ProductUUID == "" { // with a UUID, ensureRamdisk finds the MAC
		return errs.New(errs.Unsupported, "BMC %s reports no MACs and none were enrolled: enroll with --macs, or with "+
			"--product-uuid to find the MAC by PXE discovery", r.node.BMC.Address)
	}
	return nil
}

// refreshInventory asks the ramdisk for its inventory and records the disks,
// which every later wipe must cover.
func (r *run) refreshInventory() error {
	var inv kinds.Inventory
	res, err := r.ramdisk(kinds.InventoryRefresh, steps.Timeout(kinds.InventoryRefresh), struct{}{}, &inv)
	if err != nil {
		return err
	}
	if err := r.checkDiscovered(res.Payload); err != nil {
		return err
	}
	disks := make([]string, 0, len(inv.Disks))
	for _, d := range inv.Disks {
		disks = append(disks, d.Name)
	}
	f := kinds.FactsInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, Disks: disks, Inventory: res.Payload}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActRecordFacts, f).Get(r.ctx, nil); err != nil {
		return err
	}
	r.node.Disks = disks
	return nil
}

// wipe wipes every disk in mode (a disk that cannot do mode gets fallback,
// if given) and has the control plane verify the machine's signed
// attestation against the inventory and record it for this run, so that
// this run's move into ready may consume it. The attestation stays in
// history.
func (r *run) wipe(mode, fallback string) (*kinds.WipeAttestation, error) {
	nonce := r.info.WorkflowExecution.ID + "/" + r.info.WorkflowExecution.RunID
	in := kinds.WipeInput{Mode: mode, Fallback: fallback, WorkflowID: r.info.WorkflowExecution.ID, Nonce: nonce}
	var res kinds.Result
	err := r.onRamdisk(func() (err error) {
		res, err = r.ramdisk(kinds.DiskWipe, steps.Timeout(kinds.DiskWipe), in, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	var att kinds.WipeAttestation
	v := kinds.VerifyWipeInput{TenantID: r.in.TenantID, NodeID: r.in.NodeID, WorkflowID: r.info.WorkflowExecution.ID,
		RunID: r.info.WorkflowExecution.RunID, Nonce: nonce, Modes: []string{mode}, Result: res}
	if fallback != "" {
		v.Modes = append(v.Modes, fallback)
	}
	if err := workflow.ExecuteActivity(r.cp(), kinds.ActVerifyWipe, v).Get(r.ctx, &att); err != nil {
		return nil, err
	}
	return &att, nil
}
