package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

// Discovery is a MAC a site's agent saw PXE-booting without a boot entry
// (a row of pxe_discoveries).
type Discovery struct {
	TenantID, SiteID, MAC string
	ClientUUID            string // DHCP option 97 as sent; "" when unknown
	Arch                  string // DHCP option 93 by its IANA name; "" when unknown
	FirstSeen, LastSeen   time.Time
	Count                 int64
	// Filled by ListDiscoveries: the node waiting with this MAC as its
	// candidate, and the node the MAC belongs to.
	CandidateFor, NodeID string
}

// What a node's workflow waits for in metal.ensureRamdisk (node_mac_waits).
const (
	// WaitPXEDiscovery: the machine was power-cycled into PXE; a MAC must
	// PXE-boot under its product UUID.
	WaitPXEDiscovery = "pxeDiscovery"
	// WaitMACConfirmation: a candidate was found; an operator must confirm
	// a MAC (metal.confirmMac).
	WaitMACConfirmation = "macConfirmation"
)

// MACWait is a node's wait for its MAC.
type MACWait struct {
	TenantID, NodeID string
	WaitingFor       string // WaitPXEDiscovery or WaitMACConfirmation
	Candidate        string // for WaitMACConfirmation: the MAC found
	Since            time.Time
}

// MaxDiscoveryReport bounds the MACs of one report.
const MaxDiscoveryReport = 256

// ReportDiscoveries records what a site agent reports of its site's PXE
// discoveries. Each MAC's record is merged with what is stored (earliest
// first sighting, latest last one, highest count, the newest UUID and
// architecture given), so the same report sent twice changes nothing. A
// report that brings a new sighting stamps heard_at with the database's
// clock.
func (s *Store) ReportDiscoveries(ctx context.Context, siteID string, ds []Discovery) error {
	const op = "store.ReportDiscoveries"
	if len(ds) == 0 {
		return nil
	}
	if len(ds) > MaxDiscoveryReport {
		return errs.Invalid("items", "a report holds at most %d MACs, got %d", MaxDiscoveryReport, len(ds))
	}
	var macs, uuids, archs []string
	var first, last []time.Time
	var counts []int64
	for _, d := range ds {
		macs, uuids, archs = append(macs, d.MAC), append(uuids, d.ClientUUID), append(archs, d.Arch)
		first, last, counts = append(first, d.FirstSeen), append(last, d.LastSeen), append(counts, d.Count)
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO pxe_discoveries AS d (tenant_id, site_id, mac, client_uuid, arch, first_seen, last_seen, count)
		SELECT s.tenant_id, s.id, u.mac, u.uuid, u.arch, u.first, u.last, u.count
		  FROM sites s, unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::bigint[])
		       AS u (mac, uuid, arch, first, last, count)
		 WHERE s.id = $1
		ON CONFLICT (tenant_id, site_id, mac) DO UPDATE SET
			client_uuid = COALESCE(NULLIF(EXCLUDED.client_uuid, ''), d.client_uuid),
			arch = COALESCE(NULLIF(EXCLUDED.arch, ''), d.arch),
			first_seen = LEAST(d.first_seen, EXCLUDED.first_seen),
			last_seen = GREATEST(d.last_seen, EXCLUDED.last_seen),
			count = GREATEST(d.count, EXCLUDED.count),
			heard_at = CASE WHEN EXCLUDED.last_seen > d.last_seen OR EXCLUDED.count > d.count
			                THEN now() ELSE d.heard_at END`,
		siteID, macs, uuids, archs, first, last, counts)
	if err != nil {
		return dbError(op, err)
	}
	if tag.RowsAffected() == 0 {
		return notFound("site", siteID).WithOp(op)
	}
	return nil
}

// ListDiscoveries returns the PXE discoveries of the tenant's site, most
// recently seen first, each with the node that waits for it as its
// candidate and the node it belongs to, if any.
func (s *Store) ListDiscoveries(ctx context.Context, tenantID, siteID string) ([]Discovery, error) {
	const op = "store.ListDiscoveries"
	if _, err := s.GetSite(ctx, tenantID, siteID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT d.tenant_id, d.site_id, d.mac, d.client_uuid, d.arch, d.first_seen, d.last_seen, d.count,
			COALESCE((SELECT w.node_id FROM node_mac_waits w JOIN metal_nodes n ON n.tenant_id = w.tenant_id AND n.id = w.node_id
			           WHERE w.tenant_id = d.tenant_id AND w.candidate = d.mac AND n.site_id = d.site_id
			           ORDER BY w.node_id LIMIT 1), ''),
			COALESCE((SELECT n.id FROM metal_nodes n
			           WHERE n.tenant_id = d.tenant_id AND d.mac = ANY (n.macs) AND n.state <> 'retired'
			           ORDER BY n.id LIMIT 1), '')
		  FROM pxe_discoveries d
		 WHERE d.tenant_id = $1 AND d.site_id = $2
		 ORDER BY d.last_seen DESC, d.mac`, tenantID, siteID)
	if err != nil {
		return nil, dbError(op, err)
	}
	out, err := collect(rows, func(r pgx.Row) (Discovery, error) {
		var d Discovery
		err := r.Scan(&d.TenantID, &d.SiteID, &d.MAC, &d.ClientUUID, &d.Arch, &d.FirstSeen, &d.LastSeen, &d.Count,
			&d.CandidateFor, &d.NodeID)
		return d, err
	})
	return out, dbError(op, err)
}

// FindCandidate returns the MAC first seen PXE-booting on the tenant's
// site under one of uuids (the forms a product UUID may take on the wire)
// that was heard of at or after since and belongs to no node; false when
// there is none yet.
func (s *Store) FindCandidate(ctx context.Context, tenantID, siteID string, uuids []string, since time.Time) (Discovery, bool, error) {
	var d Discovery
	err := s.pool.QueryRow(ctx, `
		SELECT d.tenant_id, d.site_id, d.mac, d.client_uuid, d.arch, d.first_seen, d.last_seen, d.count
		  FROM pxe_discoveries d
		 WHERE d.tenant_id = $1 AND d.site_id = $2 AND d.client_uuid = ANY ($3) AND d.heard_at >= $4
		   AND NOT EXISTS (SELECT 1 FROM metal_nodes n
		                    WHERE n.tenant_id = d.tenant_id AND d.mac = ANY (n.macs) AND n.state <> 'retired')
		 ORDER BY d.first_seen, d.mac LIMIT 1`, tenantID, siteID, uuids, since).
		Scan(&d.TenantID, &d.SiteID, &d.MAC, &d.ClientUUID, &d.Arch, &d.FirstSeen, &d.LastSeen, &d.Count)
	if errors.Is(err, pgx.ErrNoRows) {
		return Discovery{}, false, nil
	}
	return d, err == nil, dbError("store.FindCandidate", err)
}

// BeginMACWait starts (or restarts) the wait of a node that has no MAC for
// a MAC under its product UUID, and returns when it began by the
// database's clock: sightings heard from then on count. A node with MACs
// is INVALID_STATE.
func (s *Store) BeginMACWait(ctx context.Context, tenantID, nodeID string) (time.Time, error) {
	const op = "store.BeginMACWait"
	var since time.Time
	err := s.pool.QueryRow(ctx, `
		INSERT INTO node_mac_waits (tenant_id, node_id, waiting_for)
		SELECT tenant_id, id, 'pxeDiscovery' FROM metal_nodes
		 WHERE tenant_id = $1 AND id = $2 AND cardinality(macs) = 0
		ON CONFLICT (tenant_id, node_id) DO UPDATE SET waiting_for = 'pxeDiscovery', candidate = '', since = now()
		RETURNING since`, tenantID, nodeID).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.GetNode(ctx, tenantID, nodeID); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, errs.New(errs.InvalidState, "node %s has MACs: it needs no PXE discovery", nodeID).WithOp(op)
	}
	return since, dbError(op, err)
}

// AwaitConfirmation records that the node's wait found candidate and now
// waits for an operator to confirm a MAC. The node must be waiting.
func (s *Store) AwaitConfirmation(ctx context.Context, tenantID, nodeID, candidate string) error {
	const op = "store.AwaitConfirmation"
	tag, err := s.pool.Exec(ctx, `UPDATE node_mac_waits SET waiting_for = 'macConfirmation', candidate = $3
		WHERE tenant_id = $1 AND node_id = $2`, tenantID, nodeID, candidate)
	if err != nil {
		return dbError(op, err)
	}
	if tag.RowsAffected() == 0 {
		return errs.New(errs.InvalidState, "node %s is not waiting for a MAC", nodeID).WithOp(op)
	}
	return nil
}

// EndMACWait forgets the node's wait, if any (its workflow ended).
func (s *Store) EndMACWait(ctx context.Context, tenantID, nodeID string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM node_mac_waits WHERE tenant_id = $1 AND node_id = $2", tenantID, nodeID)
	return dbError("store.EndMACWait", err)
}

// MACWaits returns the waits of the tenant's nodes by node id; nodeID ""
// means every node.
func (s *Store) MACWaits(ctx context.Context, tenantID, nodeID string) (map[string]MACWait, error) {
	const op = "store.MACWaits"
	rows, err := s.pool.Query(ctx, `SELECT tenant_id, node_id, waiting_for, candidate, since FROM node_mac_waits
		WHERE tenant_id = $1 AND ($2 = '' OR node_id = $2)`, tenantID, nodeID)
	if err != nil {
		return nil, dbError(op, err)
	}
	list, err := collect(rows, func(r pgx.Row) (MACWait, error) {
		var w MACWait
		err := r.Scan(&w.TenantID, &w.NodeID, &w.WaitingFor, &w.Candidate, &w.Since)
		return w, err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	out := make(map[string]MACWait, len(list))
	for _, w := range list {
		out[w.NodeID] = w
	}
	return out, nil
}
