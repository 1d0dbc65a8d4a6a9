package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

func (s metal) Get(ctx context.Context, r *connect.Request[v1.GetNodeRequest]) (*connect.Response[v1.GetNodeResponse], error) {
	n, err := s.node(ctx, r.Msg.TenantId, r.Msg.Id)
	if err != nil {
		return nil, err
	}
	waits, err := s.store.MACWaits(ctx, n.TenantID, n.ID)
	if err != nil {
		return nil, err
	}
	out := withWait(nodeOut(n), waits[n.ID])
	if n.State != nodestate.Retired { // a verb may work on a resting node before it moves it (deploy pins its images)
		out.Progress = nodeProgress(s.pendingOf(ctx, n.ID))
	}
	return connect.NewResponse(&v1.GetNodeResponse{Node: out}), nil
}

func (s metal) List(ctx context.Context, r *connect.Request[v1.ListNodesRequest]) (*connect.Response[v1.ListNodesResponse], error) {
	t, err := s.tenantOf(ctx, r.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListNodes(ctx, t, r.Msg.PoolId)
	if err != nil {
		return nil, err
	}
	waits, err := s.store.MACWaits(ctx, t, "")
	if err != nil {
		return nil, err
	}
	progress := s.listProgress(ctx, t, list)
	return connect.NewResponse(&v1.ListNodesResponse{Items: mapSlice(list, func(n store.Node) *v1.Node {
		out := withWait(nodeOut(n), waits[n.ID])
		out.Progress = progress[n.ID]
		return out
	})}), nil
}

func (s metal) Deploy(ctx context.Context, r *connect.Request[v1.DeployRequest]) (*connect.Response[v1.VerbResponse], error) {
	n, pool, err := s.nodeAndPool(ctx, r.Msg.TenantId, r.Msg.NodeId)
	if err != nil {
		return nil, err
	}
	if r.Msg.Profile == "" {
		return nil, errs.Invalid("profile", "name the deploy profile")
	}
	if r.Msg.ProfileVersion < 1 {
		return nil, errs.Invalid("profileVersion", "name the profile version to deploy (1 or more), got %d", r.Msg.ProfileVersion)
	}
	p, err := s.store.GetProfile(ctx, n.TenantID, r.Msg.Profile, int(r.Msg.ProfileVersion))
	if err != nil {
		return nil, err
	}
	if err := s.canRun(ctx, n, pool, p); err != nil {
		return nil, err
	}
	// The workflow runs the profile checked here, not one that shadows it or
	// is made private before its profile.get.
	return s.start(ctx, n, nodestate.Deploy, wf.Input{ProfileID: r.Msg.Profile, ProfileVersion: int(r.Msg.ProfileVersion), ProfileTenant: p.TenantID})
}

// canRun refuses, before the node moves, a stored profile that cannot run
// on node n of pool: its steps resolved against the steps the running
// workers serve and against the node (its pool's agent, its BMC's virtual
// media, the steps its site's agent serves), and the images it names. The
// first problem is INVALID_INPUT naming profile.steps[i]….
func (s metal) canRun(ctx context.Context, n store.Node, pool store.Pool, p store.Profile) error {
	var doc provision.Profile
	if err := json.Unmarshal(p.Document, &doc); err != nil {
		return fmt.Errorf("stored profile %s v%d does not decode: %w", p.ID, p.Version, err)
	}
	_, problems, err := s.resolveFor(ctx, n.TenantID, p.TenantID, doc, targetOf(n, pool))
	if err != nil || len(problems) == 0 {
		return err
	}
	more := ""
	if len(problems) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(problems)-1)
	}
	return errs.Invalid("profile."+problems[0].Field, "profile %s v%d cannot run on node %s: %s%s",
		p.ID, p.Version, n.ID, problems[0].Message, more)
}

// Wipe modes of metal.undeploy.
var wipeModes = []string{"quick", "secure-erase", "crypto-erase", "none"}

func (s metal) Undeploy(ctx context.Context, r *connect.Request[v1.UndeployRequest]) (*connect.Response[v1.VerbResponse], error) {
	mode := r.Msg.Wipe
	if mode == "" {
		mode = "quick"
	}
	var c checks
	c.oneOf("wipe", mode, wipeModes...)
	if c.err != nil {
		return nil, c.err
	}
	n, p, err := s.nodeAndPool(ctx, r.Msg.TenantId, r.Msg.NodeId)
	if err != nil {
		return nil, err
	}
	// Refused before anything moves: such a release could only end failed.
	switch {
	case p.Policy.AllowUnverifiedRelease:
	case p.Agent == kinds.AgentNone:
		return nil, errs.New(errs.UnverifiedWipe, "node %s: pool %s runs no agent (agent: none), so no wipe can be "+
			"attested, and it does not set policy.allowUnverifiedRelease: nothing released", n.ID, p.ID)
	case mode == "none":
		return nil, errs.New(errs.UnverifiedWipe, "node %s: --wipe none needs policy.allowUnverifiedRelease on pool %s; "+
			"undeploy with --wipe quick, secure-erase or crypto-erase", n.ID, p.ID)
	}
	return s.start(ctx, n, nodestate.Undeploy, wf.Input{Wipe: mode})
}

func (s metal) Power(ctx context.Context, r *connect.Request[v1.PowerRequest]) (*connect.Response[v1.VerbResponse], error) {
	if _, err := bmc.ParsePowerAction(r.Msg.Action); err != nil {
		return nil, err
	}
	n, err := s.node(ctx, r.Msg.TenantId, r.Msg.NodeId)
	if err != nil {
		return nil, err
	}
	return s.start(ctx, n, nodestate.Power, wf.Input{Action: r.Msg.Action})
}

// Abort stops the node's running workflow; the workflow moves the node to
// failed with failedFrom and the reason.
func (s metal) Abort(ctx context.Context, r *connect.Request[v1.AbortRequest]) (*connect.Response[v1.VerbResponse], error) {
	if r.Msg.Reason == "" {
		return nil, errs.Invalid("reason", "say why: the reason is recorded on the node")
	}
	n, err := s.node(ctx, r.Msg.TenantId, r.Msg.NodeId)
	if err != nil {
		return nil, err
	}
	if err := s.needTemporal(); err != nil {
		return nil, err
	}
	n, busy, err := s.settled(ctx, n)
	if err != nil {
		return nil, err
	}
	if busy == nil {
		return nil, errs.New(errs.InvalidState, "node %s (%s) runs no workflow: nothing to abort", n.ID, n.State)
	}
	id := wf.WorkflowID(n.ID)
	if err := s.temporal.SignalWorkflow(codec.WithTenant(ctx, n.TenantID), id, "", wf.AbortSignal, r.Msg.Reason); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "signal %s", id)
	}
	if err := s.temporal.CancelWorkflow(ctx, id, ""); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cancel %s", id)
	}
	return connect.NewResponse(&v1.VerbResponse{Node: nodeOut(n), WorkflowId: id}), nil
}

type commands struct{ *Server }

func (s commands) List(ctx context.Context, r *connect.Request[v1.ListCommandsRequest]) (*connect.Response[v1.ListCommandsResponse], error) {
	n, err := metal(s).node(ctx, r.Msg.TenantId, r.Msg.NodeId)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListCommands(ctx, n.TenantID, n.ID)
	if err != nil {
		return nil, err
	}
	out := &v1.ListCommandsResponse{}
	var running map[string]pending
	if slices.ContainsFunc(list, func(c store.Command) bool { return c.Status == store.CommandSent }) {
		running = s.pendingOf(ctx, n.ID)
	}
	for _, c := range list {
		x := &v1.Command{Id: c.ID, NodeId: c.NodeID, SiteId: c.SiteID, Kind: c.Kind, RunsOn: c.RunsOn,
			WorkflowId: c.WorkflowID, RunId: c.RunID, Step: c.Step, Attempt: int32(c.Attempt), Status: c.Status,
			ErrorKind: c.ErrorKind, Error: c.Error, StartedAt: timestamppb.New(c.StartedAt)}
		if c.FinishedAt != nil {
			x.FinishedAt = timestamppb.New(*c.FinishedAt)
			x.DurationMs = c.FinishedAt.Sub(c.StartedAt).Milliseconds()
		}
		if p, ok := running[c.Step]; ok && c.Status == store.CommandSent && p.kind == c.Kind {
			x.Progress = describePending(p)
		}
		out.Items = append(out.Items, x)
	}
	return connect.NewResponse(out), nil
}
