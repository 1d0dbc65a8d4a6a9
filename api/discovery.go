package api

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

// Discovered lists what the site's agents saw PXE-booting without a boot
// entry, with the node each MAC is a candidate of or belongs to.
func (s metal) Discovered(ctx context.Context, r *connect.Request[v1.DiscoveredRequest]) (*connect.Response[v1.DiscoveredResponse], error) {
	t, err := s.tenantOf(ctx, r.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	var c checks
	c.id("siteId", ids.Site, r.Msg.SiteId)
	if c.err != nil {
		return nil, c.err
	}
	list, err := s.store.ListDiscoveries(ctx, t, r.Msg.SiteId)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.DiscoveredResponse{Items: mapSlice(list, func(d store.Discovery) *v1.PxeDiscovery {
		return &v1.PxeDiscovery{SiteId: d.SiteID, Mac: d.MAC, ClientUuid: d.ClientUUID, Arch: d.Arch,
			FirstSeen: timestamppb.New(d.FirstSeen), LastSeen: timestamppb.New(d.LastSeen), Count: d.Count,
			CandidateFor: d.CandidateFor, NodeId: d.NodeID}
	})}), nil
}

// ConfirmMac binds a discovered MAC to a node that waits for a MAC
// confirmation, then wakes its workflow. The store refuses, changing
// nothing, a node that is not waiting, a MAC never seen on its site and a
// MAC another node has.
func (s metal) ConfirmMac(ctx context.Context, r *connect.Request[v1.ConfirmMacRequest]) (*connect.Response[v1.ConfirmMacResponse], error) {
	mac, err := bmc.ParseMAC("mac", r.Msg.Mac)
	if err != nil {
		return nil, err
	}
	n, err := s.node(ctx, r.Msg.TenantId, r.Msg.NodeId)
	if err != nil {
		return nil, err
	}
	if n, err = s.store.ConfirmMAC(ctx, n.TenantID, n.ID, mac, store.WaitMACConfirmation); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "MAC confirmed", "node", n.ID, "mac", mac)
	if s.temporal != nil {
		// The workflow reads the node on its own too, so a lost signal only
		// delays it to its next read (within the hour).
		if err := s.temporal.SignalWorkflow(codec.WithTenant(ctx, n.TenantID), wf.WorkflowID(n.ID), "", wf.MACConfirmedSignal, mac); err != nil {
			s.log.WarnContext(ctx, "could not wake the node's workflow; it reads the node on its own", "node", n.ID, "err", err)
		}
	}
	return connect.NewResponse(&v1.ConfirmMacResponse{Node: nodeOut(n)}), nil
}

// withWait adds what the node's workflow waits for, if anything.
func withWait(out *v1.Node, w store.MACWait) *v1.Node {
	out.WaitingFor, out.MacCandidate = w.WaitingFor, w.Candidate
	return out
}

type discoveries struct {
	*Server
	a Agents
}

// Report records the calling site agent's PXE discoveries of its own site.
func (s discoveries) Report(ctx context.Context, r *connect.Request[v1.ReportDiscoveriesRequest]) (*connect.Response[v1.ReportDiscoveriesResponse], error) {
	site, err := s.a.sitePeer(ctx, "reports PXE discoveries")
	if err != nil {
		return nil, err
	}
	items := r.Msg.Items
	if len(items) > store.MaxDiscoveryReport {
		return nil, errs.Invalid("items", "a report holds at most %d MACs, got %d", store.MaxDiscoveryReport, len(items))
	}
	ds := make([]store.Discovery, 0, len(items))
	for i, it := range items {
		d, err := sighting(fmt.Sprintf("items[%d]", i), it)
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	if err := s.store.ReportDiscoveries(ctx, site, ds); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.ReportDiscoveriesResponse{}), nil
}

// sighting validates one reported discovery.
func sighting(field string, it *v1.DiscoverySighting) (store.Discovery, error) {
	mac, err := bmc.ParseMAC(field+".mac", it.Mac)
	if err != nil {
		return store.Discovery{}, err
	}
	var c checks
	if it.ClientUuid != "" && !uuidPattern.MatchString(it.ClientUuid) {
		c.fail(field+".clientUuid", "not a UUID: %s", quote(it.ClientUuid))
	}
	if len(it.Arch) > 64 {
		c.fail(field+".arch", "an architecture name of at most 64 bytes, got %d", len(it.Arch))
	}
	first, last := it.FirstSeen.AsTime(), it.LastSeen.AsTime()
	if it.FirstSeen == nil || it.LastSeen == nil || last.Before(first) || it.Count < 1 {
		c.fail(field, "give firstSeen, lastSeen no earlier than it, and a count of 1 or more")
	}
	if c.err != nil {
		return store.Discovery{}, c.err
	}
	return store.Discovery{MAC: mac, ClientUUID: strings.ToLower(it.ClientUuid), Arch: it.Arch, FirstSeen: first, LastSeen: last, Count: it.Count}, nil
}
