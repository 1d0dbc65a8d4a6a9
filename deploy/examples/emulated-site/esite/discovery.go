package esite

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/store"
)

// enroll enrolls the machine by its BMC, and with Discovery by its
// product UUID too (its BMC tells no MAC), in the trusting pool for
// DiscoverTrusted; an IPMI machine with its MAC (its BMC tells none) in
// the ipmi pool. The node's ID.
func (s *site) enroll(ctx context.Context, m *machine) (string, error) {
	req := &v1.EnrollRequest{SiteId: s.siteID, PoolId: s.poolID, Bmc: &v1.Bmc{Address: m.q.BMCAddress(), Driver: m.q.BMCDriver(),
		Credentials: &v1.BmcCredentials{Username: bmcUser, Password: bmcPassword}}}
	if m.spec.IPMI {
		req.PoolId, req.Macs = s.ipmiPool, []string{m.q.Config().MAC}
	}
	if m.spec.Discovery != "" {
		req.ProductUuid = m.q.Config().UUID
	}
	if m.spec.Discovery == DiscoverTrusted {
		req.PoolId = s.trusted
	}
	e, err := s.api.Metal.Enroll(ctx, connect.NewRequest(req))
	if err != nil {
		return "", fmt.Errorf("metal.enroll: %w", err)
	}
	by := "its " + req.Bmc.Driver + " BMC"
	if len(req.Macs) > 0 {
		by += " and MAC " + req.Macs[0]
	}
	if req.ProductUuid != "" {
		by += " and product UUID " + req.ProductUuid
	}
	s.say("%s: enrolled as %s by %s", m.spec.Name, e.Msg.Node.Id, by)
	return e.Msg.Node.Id, nil
}

// confirm waits until the node waits for a MAC confirmation, finds its
// candidate in metal discovered (the MAC its firmware PXE-booted from,
// matched by DHCP option 97) and confirms it with metal.confirmMac.
func (s *site) confirm(ctx context.Context, m *machine, r *MachineResult) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	for {
		n, err := s.api.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: r.Node}))
		if err == nil && (n.Msg.Node.State == "failed" || n.Msg.Node.State == "ready") {
			return fmt.Errorf("%s (%s) is %s without a MAC confirmation: %s", m.spec.Name, r.Node, n.Msg.Node.State, n.Msg.Node.LastError)
		}
		if err == nil && n.Msg.Node.WaitingFor == store.WaitMACConfirmation {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (%s) never waited for a MAC confirmation within %v", m.spec.Name, r.Node, s.cfg.ReadyTimeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
	d, err := s.api.Metal.Discovered(ctx, connect.NewRequest(&v1.DiscoveredRequest{SiteId: s.siteID}))
	if err != nil {
		return fmt.Errorf("metal.discovered: %w", err)
	}
	for _, it := range d.Msg.Items {
		if it.CandidateFor == r.Node {
			r.Candidate, r.ClientUUID = it.Mac, it.ClientUuid
		}
	}
	s.say("%s: metal discovered shows %s (client UUID %s) as the candidate of %s; confirming it", m.spec.Name, r.Candidate, r.ClientUUID, r.Node)
	if r.Candidate == "" {
		return fmt.Errorf("metal discovered = %v: no candidate for %s", d.Msg.Items, r.Node)
	}
	if _, err := s.api.Metal.ConfirmMac(ctx, connect.NewRequest(&v1.ConfirmMacRequest{NodeId: r.Node, Mac: r.Candidate})); err != nil {
		return fmt.Errorf("metal.confirmMac(%s): %w", r.Candidate, err)
	}
	return nil
}

// discoveredMACs records the MACs the node has at ready and, for a node
// taken without confirmation, what metal discovered shows of its MAC.
func (s *site) discoveredMACs(ctx context.Context, m *machine, r *MachineResult) error {
	n, err := s.api.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: r.Node}))
	if err != nil {
		return fmt.Errorf("metal.get: %w", err)
	}
	r.MACs = n.Msg.Node.Macs
	d, err := s.api.Metal.Discovered(ctx, connect.NewRequest(&v1.DiscoveredRequest{SiteId: s.siteID}))
	if err != nil {
		return fmt.Errorf("metal.discovered: %w", err)
	}
	for _, it := range d.Msg.Items {
		if it.NodeId == r.Node && r.ClientUUID == "" {
			r.ClientUUID = it.ClientUuid
		}
	}
	s.say("%s: at ready its node has MACs %v (learnt by PXE; client UUID %s)", m.spec.Name, r.MACs, r.ClientUUID)
	return nil
}

// unplugged enrolls a machine whose link is down and waits for the node
// to fail: each ramdisk boot stalls at "armed" (no PXE request), the
// workflow boots it again, and after the bounded boots the node fails
// naming the milestone and the fix.
func (s *site) unplugged(ctx context.Context, m *machine) MachineResult {
	r := MachineResult{Name: m.spec.Name, Firmware: m.spec.Firmware, MAC: m.q.Config().MAC, UUID: m.q.Config().UUID}
	enrolled := time.Now()
	var err error
	if r.Node, err = s.enroll(ctx, m); err != nil {
		r.Error = err.Error()
		return r
	}
	r.State, err = s.wait(ctx, m.spec.Name, r.Node, "failed")
	r.EnrollToFailed = time.Since(enrolled)
	if err != nil {
		r.Error = err.Error()
	}
	if n, err := s.api.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: r.Node})); err == nil {
		r.LastError = n.Msg.Node.LastError
	}
	r.BMCCalls = m.q.BMCCalls()
	for _, b := range m.q.Boots() {
		r.Boots = append(r.Boots, fmt.Sprintf("%s(%s)", b.Device, b.Reason))
	}
	s.say("%s: %s %s after the enroll: %s; boots %v", m.spec.Name, r.State, r.EnrollToFailed.Round(100*time.Millisecond), r.LastError, r.Boots)
	return r
}
