package boot

import (
	"fmt"
	"sync"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// Milestones of a ramdisk boot the site agent set up, in the order a
// machine reaches them: what it saw of the boot, so a boot that stalls says
// where.
const (
	MilestoneArmed  = "armed"  // the boot entry is set; the machine is about to power-cycle
	MilestoneDHCP   = "dhcp"   // proxy DHCP answered one of its MACs
	MilestoneScript = "script" // it fetched its iPXE script
	MilestoneKernel = "kernel" // it fetched the ramdisk kernel (Detail: the HTTP status)
	MilestoneInitrd = "initrd" // it fetched the initramfs (Detail: the HTTP status)
	MilestoneJoined = "joined" // its ramdisk asked the relay for commands
	// MilestoneRefused: the control plane refused its ramdisk's join
	// (Detail: why; UNAUTHENTICATED when its single-use token is spent by
	// an earlier join of this boot) and a ramdisk does not retry a refusal,
	// so this boot never joins.
	MilestoneRefused = "refused"
)

// Milestone is one step a boot was seen to reach.
type Milestone struct {
	Name   string    `json:"name"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail,omitempty"`
}

// trails are the ramdisk boots in progress, by node. They live in memory:
// a site agent that restarts mid-boot follows that boot no further, and the
// command's own timeouts apply.
type trails struct {
	mu    sync.Mutex
	by    map[string][]Milestone
	count func(name string) // hears each new milestone; nil counts nothing
}

// CountMilestones has f hear each milestone a followed boot newly reaches
// (armed included; a repeat is not new), for the metrics.
func (t *Table) CountMilestones(f func(name string)) {
	t.trails.mu.Lock()
	defer t.trails.mu.Unlock()
	t.trails.count = f
}

// reached counts milestone name; tr.mu is held.
func (tr *trails) reached(name string) {
	if tr.count != nil {
		tr.count(name)
	}
}

func (tr *trails) set(nodeID string, ms []Milestone) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.by == nil {
		tr.by = map[string][]Milestone{}
	}
	if ms == nil {
		delete(tr.by, nodeID)
		return
	}
	tr.by[nodeID] = ms
	tr.reached(ms[len(ms)-1].Name)
}

// Mark records that the node's boot reached milestone name. Only a boot the
// agent armed (a ramdisk entry) is followed; the same milestone twice in a
// row (a retried fetch, every long poll of a joined ramdisk) is one.
func (t *Table) Mark(nodeID, name, detail string) {
	tr := &t.trails
	tr.mu.Lock()
	defer tr.mu.Unlock()
	ms, ok := tr.by[nodeID]
	if !ok {
		return
	}
	if last := ms[len(ms)-1]; last.Name == name && last.Detail == detail {
		return
	}
	tr.by[nodeID] = append(ms, Milestone{Name: name, At: t.now().UTC(), Detail: detail})
	tr.reached(name)
	t.log.Info("boot milestone", "node", nodeID, "milestone", name, "detail", detail)
}

// MarkMAC marks the boot of the node whose entry serves mac.
func (t *Table) MarkMAC(mac, name, detail string) {
	if e, ok := t.Lookup(mac); ok && e.Ramdisk {
		t.Mark(e.NodeID, name, detail)
	}
}

// Trail returns the milestones the node's current ramdisk boot reached, the
// first being armed; nil when the agent follows no boot of the node.
func (t *Table) Trail(nodeID string) []Milestone {
	t.trails.mu.Lock()
	defer t.trails.mu.Unlock()
	return append([]Milestone(nil), t.trails.by[nodeID]...)
}

// Progress describes where the node's ramdisk boot is while it has not
// reached the relay ("script, 3s ago"); "" when it has, or is not followed.
func (t *Table) Progress(nodeID string) string {
	ms := t.Trail(nodeID)
	if len(ms) == 0 || ms[len(ms)-1].Name == MilestoneJoined {
		return ""
	}
	last := ms[len(ms)-1]
	return fmt.Sprintf("%s%s, %s ago", last.Name, detailOf(last), t.now().Sub(last.At).Round(time.Second))
}

// Stalled says whether the node's ramdisk boot has shown no new milestone
// for longer than after, and if so returns BOOT_STALLED naming the last
// milestone it reached and what to check. A boot whose ramdisk joined, or
// one the agent does not follow, never stalls here; one whose machine
// PXE-booted again after its ramdisk joined stalls at once (restarted).
func (t *Table) Stalled(nodeID string, after time.Duration) error {
	ms := t.Trail(nodeID)
	if len(ms) == 0 {
		return nil
	}
	last := ms[len(ms)-1]
	if last.Name == MilestoneJoined {
		return nil
	}
	if err := restarted(nodeID, ms); err != nil {
		return err
	}
	if last.Name == MilestoneRefused {
		return errs.New(errs.BootStalled, "the ramdisk of %s cannot join: the control plane refused its join (%s), "+
			"which a ramdisk does not retry, and this boot's single-use token is spent or unusable; boot the ramdisk "+
			"again with a fresh token", nodeID, last.Detail)
	}
	// A refused kernel or initramfs is not fetched better by waiting.
	quiet := t.now().Sub(last.At)
	if quiet <= after && !failedFetch(last) {
		return nil
	}
	return errs.New(errs.BootStalled, "the ramdisk boot of %s stopped at %q%s, %s ago: %s", nodeID, last.Name,
		detailOf(last), quiet.Round(time.Second), hint(last, t.macsOf(nodeID)))
}

// restarted is BOOT_STALLED, at once, when the machine fetched its iPXE
// script (or the ramdisk's kernel) again after its ramdisk joined: the
// ramdisk died and the machine PXE-booted again, with the same script and
// so the same single-use discovery token, which the dead ramdisk spent. Its
// join will be refused; waiting for it is waiting forever.
func restarted(nodeID string, ms []Milestone) error {
	joined := -1
	for i, m := range ms {
		if m.Name == MilestoneJoined {
			joined = i
		}
	}
	for _, m := range ms[joined+1:] {
		if joined >= 0 && (m.Name == MilestoneScript || m.Name == MilestoneKernel || m.Name == MilestoneInitrd) {
			return errs.New(errs.BootStalled, "the ramdisk of %s restarted while running a command (the machine "+
				"fetched its %s again after the ramdisk joined) and this boot's single-use token is spent, so the new "+
				"ramdisk cannot join; boot the ramdisk again with a fresh token", nodeID, m.Name)
		}
	}
	return nil
}

func failedFetch(m Milestone) bool {
	return (m.Name == MilestoneKernel || m.Name == MilestoneInitrd) && m.Detail != "" && m.Detail != "HTTP 200"
}

func detailOf(m Milestone) string {
	if m.Detail == "" {
		return ""
	}
	return " (" + m.Detail + ")"
}

// hint is the likely fix for a boot that stopped after m.
func hint(m Milestone, macs []string) string {
	switch {
	case m.Name == MilestoneArmed:
		return fmt.Sprintf("no PXE request and no iPXE script fetch from its MACs %v since the boot was set up; "+
			"check its boot order (network first), its VLAN and cabling, and that this site agent's proxy DHCP "+
			"(--pxe-interface) or a DHCP server pointing at its iPXE script serves that network", macs)
	case m.Name == MilestoneDHCP:
		return "proxy DHCP answered it but it never fetched its iPXE script; check that TFTP (udp/69) and this " +
			"agent's boot listener are reachable from it, and the iPXE binaries (--ipxe-bios, --ipxe-efi)"
	case m.Name == MilestoneScript:
		return "it fetched its iPXE script but not the ramdisk kernel; check that the boot listener's address " +
			"(--advertise-host) is reachable from it"
	case failedFetch(m):
		return "the ramdisk files are missing or unreadable on this site agent; build them (./run ramdisk) " +
			"and start bcd site with --ramdisk-dir pointing at them"
	case m.Name == MilestoneKernel:
		return "it fetched the kernel but not the initramfs; check the link and the boot listener"
	default:
		return "the ramdisk kernel booted but its ramdisk never reached the relay; read the machine's console " +
			"for 'better-compute ramdisk:' lines (modules, DHCP on its boot NIC, the relay URL)"
	}
}

func (t *Table) macsOf(nodeID string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.entries[nodeID].MACs...)
}

// followLocked starts following e's boot (a ramdisk entry: armed) or stops
// (a local-boot entry or none).
func (t *Table) followLocked(nodeID string, e *kinds.BootEntry) {
	if e == nil || !e.Ramdisk {
		t.trails.set(nodeID, nil)
		return
	}
	t.trails.set(nodeID, []Milestone{{Name: MilestoneArmed, At: t.now().UTC()}})
}

// JoinRefused marks the boot whose ramdisk entry carries token as refused
// (see MilestoneRefused); a token no entry carries is not this table's.
func (t *Table) JoinRefused(token string, err error) {
	if token == "" {
		return
	}
	t.mu.Lock()
	var node string
	for id, e := range t.entries {
		if e.Ramdisk && e.DiscoveryToken == token {
			node = id
		}
	}
	t.mu.Unlock()
	if node != "" {
		t.Mark(node, MilestoneRefused, err.Error())
	}
}
