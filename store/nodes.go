package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
)

// Node is a machine enrolled by its BMC (a row of metal_nodes).
type Node struct {
	ID, TenantID, SiteID, PoolID string
	State                        nodestate.State
	FailedFrom                   nodestate.State
	Maintenance                  bool
	MaintenanceReason            string
	Role                         string
	BMCAddress, BMCDriver        string
	BMCCredentialsRef            string
	BMCTLS                       bmc.TLS // how the BMC's certificate is trusted (bmc_tls)
	MACs                         []string
	ProductUUID                  string
	Addresses                    []string
	Inventory                    json.RawMessage
	Disks                        []string
	ProfileID                    string
	ProfileVersion               int
	LastError                    string
	CreatedAt, UpdatedAt         time.Time
}

const nodeColumns = `id, tenant_id, site_id, pool_id, state, COALESCE(failed_from, ''), maintenance,
	maintenance_reason, role, bmc_address, bmc_driver, bmc_credentials_ref, macs, product_uuid, addresses,
	inventory, disks, profile_id, profile_version, last_error, created_at, updated_at,
	bmc_tls`

func scanNode(row pgx.Row) (Node, error) {
	var n Node
	err := row.Scan(&n.ID, &n.TenantID, &n.SiteID, &n.PoolID, &n.State, &n.FailedFrom, &n.Maintenance,
		&n.MaintenanceReason, &n.Role, &n.BMCAddress, &n.BMCDriver, &n.BMCCredentialsRef, &n.MACs, &n.ProductUUID,
		&n.Addresses, &n.Inventory, &n.Disks, &n.ProfileID, &n.ProfileVersion, &n.LastError, &n.CreatedAt, &n.UpdatedAt,
		&n.BMCTLS)
	return n, err
}

// CreateNode inserts a node in state enrolling. The same BMC enrolled twice
// on a site is ALREADY_EXISTS; a pool or site of another tenant is NOT_FOUND.
func (s *Store) CreateNode(ctx context.Context, n Node) (Node, error) {
	return createNode(ctx, s.pool, n)
}

// rowQuerier is the pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func createNode(ctx context.Context, q rowQuerier, n Node) (Node, error) {
	const op = "store.CreateNode"
	if n.MACs == nil {
		n.MACs = []string{}
	}
	out, err := scanNode(q.QueryRow(ctx, `
		INSERT INTO metal_nodes (id, tenant_id, site_id, pool_id, state, bmc_address, bmc_driver,
			bmc_credentials_ref, macs, product_uuid, addresses, bmc_tls)
		VALUES ($1, $2, $3, $4, 'enrolling', $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT DO NOTHING
		RETURNING `+nodeColumns, n.ID, n.TenantID, n.SiteID, n.PoolID, n.BMCAddress, n.BMCDriver,
		n.BMCCredentialsRef, n.MACs, n.ProductUUID, nonNil(n.Addresses), n.BMCTLS))
	if constraint, _, fk := violated(err); fk {
		if constraint == "metal_nodes_site_fk" {
			return Node{}, notFound("site", n.SiteID).WithOp(op)
		}
		return Node{}, notFound("pool", n.PoolID).WithOp(op)
	}
	if errors.Is(err, pgx.ErrNoRows) { // ON CONFLICT: the transaction stays usable for the lookup
		return Node{}, duplicateMachine(ctx, q, n).WithOp(op)
	}
	return out, dbError(op, err)
}

// duplicateMachine is the ALREADY_EXISTS for a node whose BMC address or
// product UUID another live node of the site has (the unique indexes
// metal_nodes_bmc_key and metal_nodes_product_uuid_key), naming that node so
// the operator can use or retire it; another tenant's node is not named.
func duplicateMachine(ctx context.Context, q rowQuerier, n Node) *errs.Error {
	var id, tenant, bmcAddress string
	err := q.QueryRow(ctx, `SELECT id, tenant_id, bmc_address FROM metal_nodes
		WHERE site_id = $1 AND (bmc_address = $2 OR (product_uuid = $3 AND $3 <> ''))
		AND state <> 'retired' AND id <> $4 ORDER BY bmc_address = $2 DESC LIMIT 1`,
		n.SiteID, n.BMCAddress, n.ProductUUID, n.ID).Scan(&id, &tenant, &bmcAddress)
	what := "BMC " + n.BMCAddress
	if err == nil && bmcAddress != n.BMCAddress {
		what = "the machine with product UUID " + n.ProductUUID + " (BMC " + bmcAddress + ")"
	}
	if err != nil || tenant != n.TenantID {
		return errs.New(errs.AlreadyExists, "%s is already enrolled on site %s", what, n.SiteID)
	}
	return errs.New(errs.AlreadyExists, "%s is already enrolled on site %s as node %s: use that node, or retire it first", what, n.SiteID, id)
}

// GetNode returns the tenant's node id.
func (s *Store) GetNode(ctx context.Context, tenantID, id string) (Node, error) {
	n, err := scanNode(s.pool.QueryRow(ctx,
		"SELECT "+nodeColumns+" FROM metal_nodes WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Node{}, notFound("node", id).WithOp("store.GetNode")
	}
	return n, dbError("store.GetNode", err)
}

// GetNodeAndPool returns a node and its pool in one round trip: a
// workflow reads both before each verb.
func (s *Store) GetNodeAndPool(ctx context.Context, tenantID, id string) (Node, Pool, error) {
	const op = "store.GetNodeAndPool"
	var b pgx.Batch
	b.Queue("SELECT "+nodeColumns+" FROM metal_nodes WHERE tenant_id = $1 AND id = $2", tenantID, id)
	b.Queue("SELECT "+poolColumns+` FROM pools
		WHERE tenant_id = $1 AND id = (SELECT pool_id FROM metal_nodes WHERE tenant_id = $1 AND id = $2)`, tenantID, id)
	br := s.pool.SendBatch(ctx, &b)
	n, nerr := scanNode(br.QueryRow())
	p, perr := scanPool(br.QueryRow())
	cerr := br.Close()
	switch {
	case errors.Is(nerr, pgx.ErrNoRows):
		return Node{}, Pool{}, notFound("node", id).WithOp(op)
	case nerr != nil:
		return Node{}, Pool{}, dbError(op, nerr)
	case perr == nil && cerr == nil && p.ID == n.PoolID:
		return n, p, nil
	}
	// The node moved between the two reads, or the pool read failed: read
	// the node's pool on its own.
	p, err := s.GetPool(ctx, tenantID, n.PoolID)
	return n, p, err
}

// ListNodes returns the tenant's nodes, oldest first; poolID "" means all.
func (s *Store) ListNodes(ctx context.Context, tenantID, poolID string) ([]Node, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+nodeColumns+` FROM metal_nodes
		WHERE tenant_id = $1 AND ($2 = '' OR pool_id = $2) ORDER BY id`, tenantID, poolID)
	if err != nil {
		return nil, dbError("store.ListNodes", err)
	}
	out, err := collect(rows, scanNode)
	return out, dbError("store.ListNodes", err)
}

// Transition moves a node from one state to another, compare-and-set: if the
// node is no longer in from, nothing changes and the error is INVALID_STATE
// naming the state it is in. Moving to the state it is already in is a no-op
// (an activity retried after it committed). Moving to failed records
// failedFrom, the error, and turns maintenance on when asked. Moving to
// ready consumes the wipe record of the run in t.Run (see RecordWipe), or
// records the exception t.Exception if the pool allows it; without either
// it is UNVERIFIED_WIPE and nothing changes.
func (s *Store) Transition(ctx context.Context, tenantID, id string, from, to nodestate.State, t TransitionInfo) error {
	const op = "store.Transition"
	if err := nodestate.Check(from, to); err != nil {
		return err
	}
	if to == nodestate.Ready {
		moved, err := s.moveReady(ctx, tenantID, id, from, t)
		if moved || err != nil {
			return err
		}
		return s.notIn(ctx, tenantID, id, from, to)
	}
	// A release is a statement of its own (releaseNode), not a parameter of
	// one: Postgres planned that one afresh at every call (its plan for a
	// constant "no release" is cheaper than its generic plan).
	stmt := moveNode
	if from == nodestate.Deployed && to == nodestate.Releasing {
		stmt = releaseNode
	}
	var moved int
	err := s.pool.QueryRow(ctx, stmt, tenantID, id, from, to, storableText(t.Error), t.Maintenance).Scan(&moved)
	if err != nil {
		return dbError(op, err)
	}
	if moved == 1 {
		return nil
	}
	return s.notIn(ctx, tenantID, id, from, to)
}

// moveNode moves node $2 of tenant $1 from state $3 to $4 (Transition),
// with $5 the error and $6 whether to turn maintenance on; it answers the
// number of nodes moved.
const moveNode = `WITH moved AS (` + moveNodeUpdate + `) SELECT count(*) FROM moved`

// releaseNode is moveNode for a release (deployed → releasing), which stops
// trusting the installed OS's agent in the same statement: its bcd node's
// certificates (role node) are revoked and an unused provisioned token
// (prov) of the node spent, so a key copied off the machine before the wipe
// cannot renew itself into the node's next deployment. The release's
// ramdisk (role ramdisk) is not touched.
const releaseNode = `
	WITH moved AS (` + moveNodeUpdate + `),
	revoked AS (
		UPDATE certificates SET revoked_at = now()
		WHERE tenant_id = $1 AND identity = $2 AND role = 'node' AND revoked_at IS NULL
			AND EXISTS (SELECT 1 FROM moved)
		RETURNING serial),
	spent AS (
		UPDATE join_tokens SET used_at = now()
		WHERE tenant_id = $1 AND node_id = $2 AND kind = 'prov' AND used_at IS NULL
			AND EXISTS (SELECT 1 FROM moved)
		RETURNING id)
	SELECT count(*) FROM moved`

const moveNodeUpdate = `
	UPDATE metal_nodes SET state = $4, updated_at = now(),
		failed_from = CASE WHEN $4 = 'failed' THEN $3 ELSE NULL END,
		last_error = CASE WHEN $4 IN ('failed', 'retired') THEN $5 ELSE '' END,
		maintenance = maintenance OR $6,
		maintenance_reason = CASE WHEN $6 THEN $5 ELSE maintenance_reason END
	WHERE tenant_id = $1 AND id = $2 AND state = $3
	RETURNING id`

// notIn explains a compare-and-set that found the node elsewhere than from:
// already in to is a no-op (an activity retried after it committed),
// anything else INVALID_STATE.
func (s *Store) notIn(ctx context.Context, tenantID, id string, from, to nodestate.State) error {
	const op = "store.Transition"
	n, err := s.GetNode(ctx, tenantID, id)
	if err != nil {
		return err
	}
	if n.State == to {
		return nil
	}
	return errs.New(errs.InvalidState, "node %s is %s, not %s: it cannot move to %s", id, n.State, from, to).WithOp(op)
}

// TransitionInfo is what a move records beside the state.
type TransitionInfo struct {
	Error       string // for failed: what went wrong; for retired: what it skipped
	Maintenance bool   // turn maintenance on (e.g. an unverified wipe)
	// For ready: the workflow run making the move, whose wipe record it
	// consumes, and the exception to record instead of an attested wipe.
	Run       Run
	Exception WipeKind
}

// NodeFacts is what inspection learns about a node.
type NodeFacts struct {
	MACs        []string
	ProductUUID string
	Addresses   []string
	Inventory   json.RawMessage
	Disks       []string // disk names (WWN else serial) from the ramdisk
}

// RecordFacts stores what inspection learned; empty fields keep their value.
// A product UUID that another live node of the site has is ALREADY_EXISTS
// naming it, and nothing is stored: the same machine enrolled twice.
func (s *Store) RecordFacts(ctx context.Context, tenantID, id string, f NodeFacts) error {
	f.ProductUUID = strings.ToLower(f.ProductUUID)
	_, err := s.pool.Exec(ctx, `
		UPDATE metal_nodes SET updated_at = now(),
			macs = CASE WHEN cardinality($3::text[]) > 0 THEN $3 ELSE macs END,
			product_uuid = COALESCE(NULLIF($4, ''), product_uuid),
			addresses = CASE WHEN cardinality($5::text[]) > 0 THEN $5 ELSE addresses END,
			inventory = COALESCE($6, inventory),
			disks = CASE WHEN cardinality($7::text[]) > 0 THEN $7 ELSE disks END
		WHERE tenant_id = $1 AND id = $2`, tenantID, id, nonNil(f.MACs), f.ProductUUID, nonNil(f.Addresses),
		nullJSON(f.Inventory), nonNil(f.Disks))
	if _, unique, _ := violated(err); unique {
		n, gerr := s.GetNode(ctx, tenantID, id)
		if gerr != nil {
			return gerr
		}
		n.BMCAddress, n.ProductUUID = "", f.ProductUUID
		return duplicateMachine(ctx, s.pool, n).WithOp("store.RecordFacts")
	}
	return dbError("store.RecordFacts", err)
}

// RecordDeployment stores the profile a node was deployed with ("" clears it).
func (s *Store) RecordDeployment(ctx context.Context, tenantID, id, profileID string, version int, role string) error {
	_, err := s.pool.Exec(ctx, `UPDATE metal_nodes SET profile_id = $3, profile_version = $4, role = $5,
		updated_at = now() WHERE tenant_id = $1 AND id = $2`, tenantID, id, profileID, version, role)
	return dbError("store.RecordDeployment", err)
}

// RecordRefusal sets the error of a node that a verb left where it was
// (state): its workflow failed without moving the node, so the node shows
// why, and metal wait stops waiting. An empty msg clears it (metal.* does as
// it starts a verb), leaving updated_at, which says when the node last
// changed for the API's settled. A node no longer in state is left alone:
// a move after the refusal cleared its error already.
func (s *Store) RecordRefusal(ctx context.Context, tenantID, id string, state nodestate.State, msg string) error {
	if !state.KeepsRefusal() {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE metal_nodes SET last_error = $4,
		updated_at = CASE WHEN $4 = '' THEN updated_at ELSE now() END
		WHERE tenant_id = $1 AND id = $2 AND state = $3`,
		tenantID, id, state, storableText(msg))
	return dbError("store.RecordRefusal", err)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// storableText makes text that came from elsewhere (a BMC's or a ramdisk's
// error) fit a text column: invalid UTF-8 and NUL, which PostgreSQL
// refuses, are replaced, so recording why a node failed cannot itself fail
// and leave the node in its active state.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\x00`)
}
