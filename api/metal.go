package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"connectrpc.com/connect"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/startid"
	"github.com/better-compute/better-compute/internal/wfresult"
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
	var node store.Node
	if creds != nil {
		// The sealed password and the node are one transaction: a refused
		// enroll (the BMC is enrolled already) leaves nothing behind.
		b, _ := json.Marshal(map[string]string{"username": creds.Username, "password": creds.Password})
		node, err = s.store.CreateNodeWithSecret(ctx, n, b)
	} else {
		node, err = s.store.CreateNode(ctx, n)
	}
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
	c.credentialsRef(tenant, b.GetCredentialsRef())
	macs := make([]string, 0, len(m.Macs))
	for i, raw := range m.Macs {
		mac, err := bmc.ParseMAC(fmt.Sprintf("macs[%d]", i), raw)
		if err != nil {
			c.fail(fmt.Sprintf("macs[%d]", i), "not a MAC address: %s", quote(raw))
			continue
		}
		macs = append(macs, mac)
	}
	tls := bmcTLS(b.GetTls())
	if c.err == nil {
		if err := tls.Check("bmc.tls", addr); err != nil {
			return store.Node{}, nil, err
		}
	}
	if m.ProductUuid != "" && !uuidPattern.MatchString(m.ProductUuid) {
		c.fail("productUuid", "not a UUID: %s", quote(m.ProductUuid))
	}
	addresses := make([]string, 0, len(m.Addresses))
	for i, a := range m.Addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			c.fail(fmt.Sprintf("addresses[%d]", i), "not an IP address: %s", quote(a))
			continue
		}
		addresses = append(addresses, ip.Unmap().String())
	}
	if c.err != nil {
		return store.Node{}, nil, c.err
	}
	if err := s.checkCredentialsRef(ctx, tenant, b.GetCredentialsRef()); err != nil {
		return store.Node{}, nil, err
	}
	pool, err := s.store.GetPool(ctx, tenant, m.PoolId)
	if err != nil {
		return store.Node{}, nil, err
	}
	if pool.SiteID != m.SiteId {
		return store.Node{}, nil, errs.Invalid("poolId", "pool %s is on site %s, not %s", pool.ID, pool.SiteID, m.SiteId)
	}
	site, err := s.store.GetSite(ctx, tenant, m.SiteId)
	if err != nil {
		return store.Node{}, nil, err
	}
	if err := checkSiteDriver(site, b.GetDriver()); err != nil {
		return store.Node{}, nil, err
	}
	if hp, ok := s.hardware[pool.Policy.HardwareProfile]; ok && hp.Drivers.Power != b.GetDriver() {
		return store.Node{}, nil, errs.Invalid("bmc.driver", "pool %s's hardware profile %s drives power with %s, not %s",
			pool.ID, pool.Policy.HardwareProfile, hp.Drivers.Power, b.GetDriver())
	}
	return store.Node{ID: ids.New(ids.Node), TenantID: tenant, SiteID: m.SiteId, PoolID: m.PoolId,
		BMCAddress: addr.String(), BMCDriver: b.GetDriver(), BMCCredentialsRef: b.GetCredentialsRef(),
		BMCTLS: tls, MACs: macs, ProductUUID: strings.ToLower(m.ProductUuid), Addresses: addresses}, creds, nil
}

// bmcTLS reads how an enroll trusts the BMC's certificate; Check validates it.
func bmcTLS(t *v1.BmcTls) bmc.TLS {
	return bmc.TLS{CAPEM: t.GetCaPem(), SPKIPin: strings.TrimSpace(t.GetSpkiPin()), Insecure: t.GetInsecure()}
}

// checkCredentialsRef refuses, before any node exists, a reference the site
// could not resolve: vault:// (no Vault-compatible server is supported yet)
// and a secret:// that names no secret of the tenant. env:// is read by the
// site agent from its own environment: the API checks only its prefix.
func (s metal) checkCredentialsRef(ctx context.Context, tenant, ref string) error {
	if strings.HasPrefix(ref, "vault://") {
		return &errs.Error{Kind: errs.Unsupported, Field: "bmc.credentialsRef",
			Msg: "vault:// credentials are not supported yet: store them with 'better-compute secrets put NAME --from-file F' and give secret://" + tenant + "/NAME, or use env://"}
	}
	if !strings.HasPrefix(ref, "secret://") {
		return nil
	}
	_, key, err := parseSecretRef("bmc.credentialsRef", ref)
	if err != nil {
		return err
	}
	exists, err := s.store.SecretExists(ctx, tenant, key)
	if err != nil {
		return err
	}
	if !exists {
		return errs.Invalid("bmc.credentialsRef", "tenant %s has no secret %q: 'better-compute secrets list' shows them, 'secrets put %s --from-file F' makes it", tenant, key, key)
	}
	return nil
}

// start starts verb v's workflow on node n, one operation per node at a time.
// A node in an active state has a workflow on it: it is refused at once,
// naming that workflow. A resting node's workflow is started without asking
// Temporal first (the start itself refuses a second one); only when it is
// refused so does start wait for the node to settle (a workflow that rested
// the node may still be closing) and, checked again, start once more.
func (s metal) start(ctx context.Context, n store.Node, v nodestate.Verb, in wf.Input) (*connect.Response[v1.VerbResponse], error) {
	if err := s.needTemporal(); err != nil {
		return nil, err
	}
	if n.State.Active() {
		if _, err := s.idle(ctx, n); err != nil {
			return nil, err
		}
	}
	spec, _ := wf.VerbOf(v)
	in.TenantID, in.NodeID = n.TenantID, n.ID
	profile := spec.Profile
	if profile == "" {
		profile = in.ProfileID
	}
	for settled := false; ; settled = true {
		if err := wf.CheckVerb(v, n.State); err != nil {
			return nil, err
		}
		if n.LastError != "" && n.State.KeepsRefusal() {
			// The error an earlier verb left on the node it refused (the
			// node stayed where it was) is that verb's, not this one's.
			if err := s.store.RecordRefusal(ctx, n.TenantID, n.ID, n.State, ""); err != nil {
				return nil, err
			}
			n.LastError = ""
		}
		run, err := s.startNodeWorkflow(ctx, n, nodeRun{verb: string(v), workflow: spec.Workflow, profile: profile,
			version: in.ProfileVersion}, in)
		// Refused as busy (INVALID_STATE, the only refusal of the start), or
		// its workflow closed between the start and the look at it.
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if !settled && (errs.KindOf(err) == errs.InvalidState || errors.As(err, &started)) {
			if n, err = s.idle(ctx, n); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&v1.VerbResponse{Node: nodeOut(n), WorkflowId: run.GetID(), RunId: run.GetRunID()}), nil
	}
}

// idle returns node n once no workflow works on it (settled), or
// INVALID_STATE naming the one that does; UNAVAILABLE without Temporal.
func (s metal) idle(ctx context.Context, n store.Node) (store.Node, error) {
	if err := s.needTemporal(); err != nil {
		return n, err
	}
	n, busy, err := s.settled(ctx, n)
	if err != nil {
		return n, err
	}
	if busy != nil {
		return n, busyError(n.ID, busy)
	}
	return n, nil
}

// nodeRun names a workflow of a node: its verb (the Verb search attribute),
// its workflow type, the profile it runs ("" for none) and a bound on its
// whole run (0 for none).
type nodeRun struct {
	verb, workflow, profile string
	version                 int
	timeout                 time.Duration
}

// startTries bounds how often a verb's workflow start is asked while
// Temporal does not answer in time (the SDK waits 10 seconds for each).
const startTries = 3

// startNodeWorkflow starts r under the node's workflow id, so one operation
// runs per node at a time (INVALID_STATE naming a running one), with the
// node's search attributes; its payloads are encrypted with the tenant's key.
func (s metal) startNodeWorkflow(ctx context.Context, n store.Node, r nodeRun, in any) (client.WorkflowRun, error) {
	attrs := []temporal.SearchAttributeUpdate{
		temporal.NewSearchAttributeKeyKeyword("TenantId").ValueSet(n.TenantID),
		temporal.NewSearchAttributeKeyKeyword("NodeId").ValueSet(n.ID),
		temporal.NewSearchAttributeKeyKeyword("SiteId").ValueSet(n.SiteID),
		temporal.NewSearchAttributeKeyKeyword("Verb").ValueSet(r.verb),
	}
	if r.profile != "" {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword("ProfileId").ValueSet(r.profile),
			temporal.NewSearchAttributeKeyInt64("ProfileVersion").ValueSet(int64(r.version)))
	}
	opts := client.StartWorkflowOptions{
		ID: wf.WorkflowID(n.ID), TaskQueue: wf.ControlPlaneQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowExecutionTimeout:                 r.timeout,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(attrs...),
	}
	// Every try carries one request id: a try Temporal did not answer in
	// time (a loaded cluster) may have started the run, which the next try
	// is then answered with, not refused as a second workflow of the node.
	sctx := startid.With(codec.WithTenant(ctx, n.TenantID), rand.Text())
	var run client.WorkflowRun
	var err error
	for try := 1; try <= startTries; try++ {
		if run, err = s.temporal.ExecuteWorkflow(sctx, opts, r.workflow, in); err == nil || ctx.Err() != nil || !startid.Unanswered(err) {
			break
		}
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		if info := s.runningWorkflow(ctx, n.ID); info != nil {
			return nil, busyError(n.ID, info)
		}
	}
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "start %s", r.workflow)
	}
	return run, nil
}

// runningWorkflow returns the node's running workflow, or nil.
func (s metal) runningWorkflow(ctx context.Context, nodeID string) *workflowpb.WorkflowExecutionInfo {
	d, err := s.temporal.DescribeWorkflowExecution(ctx, wf.WorkflowID(nodeID), "")
	if err != nil || d.WorkflowExecutionInfo.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	return d.WorkflowExecutionInfo
}

// busyError is INVALID_STATE naming the node's running workflow.
func busyError(nodeID string, info *workflowpb.WorkflowExecutionInfo) error {
	return errs.New(errs.InvalidState, "node %s is busy: %s (workflow %s, run %s) is running; wait for it or abort it with `better-compute metal abort %s --reason …`",
		nodeID, info.GetType().GetName(), info.GetExecution().GetWorkflowId(), info.GetExecution().GetRunId(), nodeID)
}

// settled returns the node as it is once no workflow works on it, and the
// running workflow if one still does. A workflow that has already moved the
// node to a resting state (ready, deployed…) after it started is only
// completing: it is given a few seconds to close, and the node is read again.
func (s metal) settled(ctx context.Context, n store.Node) (store.Node, *workflowpb.WorkflowExecutionInfo, error) {
	info := s.runningWorkflow(ctx, n.ID)
	if info == nil {
		return n, nil, nil
	}
	if n.State.Active() || !n.UpdatedAt.After(info.GetStartTime().AsTime()) {
		return n, info, nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = wfresult.Get(wctx, s.temporal, wf.WorkflowID(n.ID), info.GetExecution().GetRunId(), nil)
	if info := s.runningWorkflow(ctx, n.ID); info != nil {
		return n, info, nil
	}
	n, err := s.store.GetNode(ctx, n.TenantID, n.ID)
	return n, nil, err
}

// node loads the tenant's node named by a verb's request.
func (s metal) node(ctx context.Context, tenant, id string) (store.Node, error) {
	t, err := s.nodeTenant(ctx, tenant, id)
	if err != nil {
		return store.Node{}, err
	}
	return s.store.GetNode(ctx, t, id)
}

// nodeAndPool is node with the node's pool, read in the same round trip,
// for a verb that checks the pool before it starts.
func (s metal) nodeAndPool(ctx context.Context, tenant, id string) (store.Node, store.Pool, error) {
	t, err := s.nodeTenant(ctx, tenant, id)
	if err != nil {
		return store.Node{}, store.Pool{}, err
	}
	return s.store.GetNodeAndPool(ctx, t, id)
}

// nodeTenant is the tenant a request about node id acts in, once the id
// is one.
func (s metal) nodeTenant(ctx context.Context, tenant, id string) (string, error) {
	t, err := s.tenantOf(ctx, tenant)
	if err != nil {
		return "", err
	}
	if !ids.Valid(ids.Node, id) {
		return "", errs.Invalid("nodeId", "want an id like node_01k5w…, got %s", quote(id))
	}
	return t, nil
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
	if !n.BMCTLS.IsZero() {
		out.BmcTls = &v1.BmcTls{CaPem: n.BMCTLS.CAPEM, SpkiPin: n.BMCTLS.SPKIPin, Insecure: n.BMCTLS.Insecure}
	}
	var inv map[string]any
	if len(n.Inventory) > 0 && json.Unmarshal(n.Inventory, &inv) == nil {
		out.Inventory, _ = structpb.NewStruct(inv)
	}
	return out
}
