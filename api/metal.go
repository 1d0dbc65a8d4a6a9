package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

type metal struct{ *Server }

var (
	uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	refPattern  = regexp.MustCompile(`^(secret|env|vault)://[A-Za-z0-9_./-]+$`)
)

func (s metal) Enroll(ctx context.Context, req *connect.Request[v1.EnrollRequest]) (*connect.Response[v1.VerbResponse], error) {
	m := req.Msg
	t, err := s.tenantOf(ctx, m.TenantId)
	if err != nil {
		return nil, err
	}
	n, creds, err := s.enrollInput(ctx, t, m)
	if err != nil {
		return nil, err
	}
	if creds != nil {
		b, _ := json.Marshal(map[string]string{"username": creds.Username, "password": creds.Password})
		id, err := s.store.CreateSecret(ctx, t, b)
		if err != nil {
			return nil, err
		}
		n.BMCCredentialsRef = "secret://" + t + "/" + id
	}
	node, err := s.store.CreateNode(ctx, n)
	if err != nil {
		return nil, err
	}
	return s.start(ctx, node, nodestate.Enroll, wf.Input{})
}

// enrollInput validates an enrollment and returns the node to create and
// the inline credentials, if any. It writes nothing.
func (s metal) enrollInput(ctx context.Context, tenant string, m *v1.EnrollRequest) (store.Node, *v1.BmcCredentials, error) {
	var c checks
	c.id("siteId", ids.Site, m.SiteId)
	c.id("poolId", ids.Pool, m.PoolId)
	b := m.GetBmc()
	c.oneOf("bmc.driver", b.GetDriver(), bmc.DriverRedfish, bmc.DriverIPMI)
	var addr bmc.Address
	if c.err == nil {
		var err error
		if addr, err = bmc.ParseAddress(b.GetDriver(), b.GetAddress()); err != nil {
			return store.Node{}, nil, err
		}
	}
	creds := b.GetCredentials()
	switch {
	case creds != nil && b.GetCredentialsRef() != "":
		c.fail("bmc.credentials", "give credentials or credentialsRef, not both")
	case creds == nil && b.GetCredentialsRef() == "":
		c.fail("bmc.credentials", "the BMC needs credentials: a secret://, env:// or vault:// reference, or a username and password")
	case creds != nil && (creds.Username == "" || creds.Password == ""):
		c.fail("bmc.credentials", "give both username and password")
	case creds == nil && !refPattern.MatchString(b.GetCredentialsRef()):
		c.fail("bmc.credentialsRef", "want a secret://, env:// or vault:// reference")
	}
	macs := make([]string, 0, len(m.Macs))
	for i, raw := range m.Macs {
		hw, err := net.ParseMAC(raw)
		if err != nil || len(hw) != 6 {
			c.fail(fmt.Sprintf("macs[%d]", i), "not a MAC address: %q", raw)
			continue
		}
		macs = append(macs, hw.String())
	}
	if m.ProductUuid != "" && !uuidPattern.MatchString(m.ProductUuid) {
		c.fail("productUuid", "not a UUID: %q", m.ProductUuid)
	}
	for i, a := range m.Addresses {
		if _, err := netip.ParseAddr(a); err != nil {
			c.fail(fmt.Sprintf("addresses[%d]", i), "not an IP address: %q", a)
		}
	}
	if c.err != nil {
		return store.Node{}, nil, c.err
	}
	pool, err := s.store.GetPool(ctx, tenant, m.PoolId)
	if err != nil {
		return store.Node{}, nil, err
	}
	if pool.SiteID != m.SiteId {
		return store.Node{}, nil, errs.Invalid("poolId", "pool %s is on site %s, not %s", pool.ID, pool.SiteID, m.SiteId)
	}
	if hp, ok := s.hardware[pool.Policy.HardwareProfile]; ok && hp.Drivers.Power != b.GetDriver() {
		return store.Node{}, nil, errs.Invalid("bmc.driver", "pool %s's hardware profile %s drives power with %s, not %s",
			pool.ID, pool.Policy.HardwareProfile, hp.Drivers.Power, b.GetDriver())
	}
	return store.Node{ID: ids.New(ids.Node), TenantID: tenant, SiteID: m.SiteId, PoolID: m.PoolId,
		BMCAddress: addr.String(), BMCDriver: b.GetDriver(), BMCCredentialsRef: b.GetCredentialsRef(),
		MACs: macs, ProductUUID: strings.ToLower(m.ProductUuid)}, creds, nil
}

// start starts verb v's workflow on node n, one operation per node at a time.
func (s metal) start(ctx context.Context, n store.Node, v nodestate.Verb, in wf.Input) (*connect.Response[v1.VerbResponse], error) {
	if s.temporal == nil {
		return nil, errs.New(errs.Unavailable, "this process is not connected to Temporal")
	}
	if v != nodestate.Enroll {
		if busy := s.running(ctx, n.ID); busy != nil && !s.finishing(ctx, n) {
			return nil, busy
		}
		if err := nodestate.CheckVerb(v, n.State); err != nil {
			return nil, err
		}
	}
	spec := wf.Verbs[v]
	in.TenantID, in.NodeID = n.TenantID, n.ID
	profile := spec.Profile
	if profile == "" {
		profile = in.ProfileID
	}
	opts := client.StartWorkflowOptions{
		ID: wf.WorkflowID(n.ID), TaskQueue: wf.ControlPlaneQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword("TenantId").ValueSet(n.TenantID),
			temporal.NewSearchAttributeKeyKeyword("NodeId").ValueSet(n.ID),
			temporal.NewSearchAttributeKeyKeyword("SiteId").ValueSet(n.SiteID),
			temporal.NewSearchAttributeKeyKeyword("ProfileId").ValueSet(profile),
			temporal.NewSearchAttributeKeyInt64("ProfileVersion").ValueSet(int64(in.ProfileVersion)),
			temporal.NewSearchAttributeKeyKeyword("Verb").ValueSet(string(v)),
		),
	}
	run, err := s.temporal.ExecuteWorkflow(ctx, opts, spec.Workflow, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		if busy := s.running(ctx, n.ID); busy != nil {
			return nil, busy
		}
	}
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "start %s", spec.Workflow)
	}
	return connect.NewResponse(&v1.VerbResponse{Node: nodeOut(n), WorkflowId: run.GetID(), RunId: run.GetRunID()}), nil
}

// running returns INVALID_STATE naming the node's running workflow, if any.
func (s metal) running(ctx context.Context, nodeID string) error {
	d, err := s.temporal.DescribeWorkflowExecution(ctx, wf.WorkflowID(nodeID), "")
	if err != nil || d.WorkflowExecutionInfo.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	info := d.WorkflowExecutionInfo
	return errs.New(errs.InvalidState, "node %s is busy: %s (workflow %s, run %s) is running; wait for it or abort it with `better-compute metal abort %s --reason …`",
		nodeID, info.GetType().GetName(), info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), nodeID)
}

// finishing waits a little for a workflow that already moved the node to
// a resting state (ready, deployed…) and is only completing, and reports
// whether it closed; the node is re-read, since its state may have moved.
func (s metal) finishing(ctx context.Context, n store.Node) bool {
	if n.State.Active() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.temporal.GetWorkflow(ctx, wf.WorkflowID(n.ID), "").Get(ctx, nil)
	if ctx.Err() != nil {
		return false
	}
	_ = err // the previous verb's outcome is the node's state, read again by the caller's check
	return s.running(ctx, n.ID) == nil
}

// node loads the tenant's node named by a verb's request.
func (s metal) node(ctx context.Context, tenant, id string) (store.Node, error) {
	t, err := s.tenantOf(ctx, tenant)
	if err != nil {
		return store.Node{}, err
	}
	if !ids.Valid(ids.Node, id) {
		return store.Node{}, errs.Invalid("nodeId", "want an id like node_01k5w…, got %q", id)
	}
	return s.store.GetNode(ctx, t, id)
}

func (s metal) simple(ctx context.Context, msg *v1.NodeVerbRequest, v nodestate.Verb) (*connect.Response[v1.VerbResponse], error) {
	n, err := s.node(ctx, msg.TenantId, msg.NodeId)
	if err != nil {
		return nil, err
	}
	return s.start(ctx, n, v, wf.Input{})
}

func (s metal) Manage(ctx context.Context, r *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error) {
	return s.simple(ctx, r.Msg, nodestate.Manage)
}

func (s metal) Inspect(ctx context.Context, r *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error) {
	return s.simple(ctx, r.Msg, nodestate.Inspect)
}

func (s metal) Provide(ctx context.Context, r *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error) {
	return s.simple(ctx, r.Msg, nodestate.Provide)
}

func (s metal) Rescue(ctx context.Context, r *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error) {
	return s.simple(ctx, r.Msg, nodestate.RescueV)
}

func (s metal) Unrescue(ctx context.Context, r *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error) {
	return s.simple(ctx, r.Msg, nodestate.Unrescue)
}

func (s metal) Recover(ctx context.Context, r *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error) {
	return s.simple(ctx, r.Msg, nodestate.Recover)
}

func (s metal) Retire(ctx context.Context, r *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error) {
	return s.simple(ctx, r.Msg, nodestate.Retire)
}

func nodeOut(n store.Node) *v1.Node {
	out := &v1.Node{Id: n.ID, TenantId: n.TenantID, SiteId: n.SiteID, PoolId: n.PoolID, State: string(n.State),
		FailedFrom: string(n.FailedFrom), Maintenance: n.Maintenance, MaintenanceReason: n.MaintenanceReason,
		Role: n.Role, BmcAddress: n.BMCAddress, BmcDriver: n.BMCDriver, BmcCredentialsRef: n.BMCCredentialsRef,
		Macs: n.MACs, ProductUuid: n.ProductUUID, Addresses: n.Addresses, Disks: n.Disks, ProfileId: n.ProfileID,
		ProfileVersion: int32(n.ProfileVersion), LastError: n.LastError,
		CreatedAt: timestamppb.New(n.CreatedAt), UpdatedAt: timestamppb.New(n.UpdatedAt)}
	var inv map[string]any
	if len(n.Inventory) > 0 && json.Unmarshal(n.Inventory, &inv) == nil {
		out.Inventory, _ = structpb.NewStruct(inv)
	}
	return out
}
