package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// Render resolves a profile the tenant may read into the plan a deploy
// runs, as validate resolves it (against the steps the running workers
// serve on the tenant's sites and its owner's catalog): each step, where it runs, its inputs after defaults, its timeout,
// whether it may run again, and the earlier step its fromStep names.
func (s profiles) Render(ctx context.Context, req *connect.Request[v1.RenderProfileRequest]) (*connect.Response[v1.RenderProfileResponse], error) {
	if req.Msg.ProfileVersion < 1 {
		return nil, errs.Invalid("profileVersion", "want the version to render (1 or more), got %d", req.Msg.ProfileVersion)
	}
	t, p, err := s.load(ctx, req.Msg.TenantId, req.Msg.Id, req.Msg.ProfileVersion)
	if err != nil {
		return nil, err
	}
	var doc provision.Profile
	if err := json.Unmarshal(p.Document, &doc); err != nil {
		return nil, fmt.Errorf("stored profile %s v%d does not decode: %w", p.ID, p.Version, err)
	}
	plan, problems, err := s.resolveFor(ctx, t, p.TenantID, doc, nil)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, errs.Invalid("profile."+problems[0].Field, "profile %s v%d does not resolve: %s (profiles validate lists every problem)",
			p.ID, p.Version, problems[0].Message)
	}
	out := &v1.RenderProfileResponse{}
	if out.Profile, err = profileOut(p); err != nil {
		return nil, err
	}
	for _, st := range plan.Steps {
		ps, err := plannedOut(st)
		if err != nil {
			return nil, fmt.Errorf("profile %s v%d: %w", p.ID, p.Version, err)
		}
		out.Steps = append(out.Steps, ps)
	}
	return connect.NewResponse(out), nil
}

func plannedOut(st sdk.PlannedStep) (*v1.PlannedStep, error) {
	out := &v1.PlannedStep{Index: int32(st.Index), Use: st.Use, RunsOn: string(st.RunsOn),
		TimeoutSeconds: int64(st.Timeout.Seconds()), RetrySafe: st.RetrySafe, Relays: st.Relays, Sends: st.Sends,
		FromStep: st.FromStep, FromFields: st.FromFields}
	for _, n := range st.Needs {
		out.Needs = append(out.Needs, string(n))
	}
	if len(st.With) > 0 {
		w, err := structpb.NewStruct(st.With)
		if err != nil {
			return nil, fmt.Errorf("step %d (%s) inputs: %w", st.Index, st.Use, err)
		}
		out.With = w
	}
	return out, nil
}

// Update changes the visibility of the tenant's own profile: one version,
// or every version of the id when profileVersion is 0. Steps never change:
// a version is immutable, a change is a new version.
func (s profiles) Update(ctx context.Context, req *connect.Request[v1.UpdateProfileRequest]) (*connect.Response[v1.UpdateProfileResponse], error) {
	t, err := s.owned(ctx, req.Msg.TenantId, req.Msg.Id, req.Msg.ProfileVersion)
	if err != nil {
		return nil, err
	}
	if v := req.Msg.Visibility; v != "private" && v != store.Public {
		return nil, errs.Invalid("visibility", "visibility must be private or public, got %s", quote(v))
	}
	if req.Msg.Visibility == store.Public {
		if err := s.shareable(ctx, t, req.Msg.Id, int(req.Msg.ProfileVersion)); err != nil {
			return nil, err
		}
	}
	changed, err := s.store.SetProfileVisibility(ctx, t, req.Msg.Id, int(req.Msg.ProfileVersion), req.Msg.Visibility)
	if err != nil {
		return nil, err
	}
	out := &v1.UpdateProfileResponse{}
	for _, p := range changed {
		o, err := profileOut(p)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, o)
	}
	return connect.NewResponse(out), nil
}

// shareable refuses to make public a version of the tenant's profile id
// (every version when 0) that carries user data (publicUserData).
func (s profiles) shareable(ctx context.Context, t, id string, version int) error {
	all, err := s.store.ListProfiles(ctx, t)
	if err != nil {
		return err
	}
	var mine []store.Profile
	for _, p := range all {
		if p.TenantID == t && p.ID == id && (version == 0 || p.Version == version) {
			mine = append(mine, p)
		}
	}
	return noPublicUserData(mine)
}

// Delete deletes the tenant's own profile (one version, or every version
// when profileVersion is 0) unless a running workflow or a deployed node
// uses it (INVALID_STATE naming them).
func (s profiles) Delete(ctx context.Context, req *connect.Request[v1.DeleteProfileRequest]) (*connect.Response[v1.DeleteProfileResponse], error) {
	t, err := s.owned(ctx, req.Msg.TenantId, req.Msg.Id, req.Msg.ProfileVersion)
	if err != nil {
		return nil, err
	}
	if err := s.needTemporal(); err != nil {
		return nil, err
	}
	if err := s.notRunning(ctx, t, req.Msg.Id, int(req.Msg.ProfileVersion)); err != nil {
		return nil, err
	}
	versions, err := s.store.DeleteProfile(ctx, t, req.Msg.Id, int(req.Msg.ProfileVersion))
	if err != nil {
		return nil, err
	}
	out := &v1.DeleteProfileResponse{}
	for _, v := range versions {
		out.Versions = append(out.Versions, int32(v))
	}
	return connect.NewResponse(out), nil
}

// owned checks a request naming a profile to change and returns the
// caller's tenant; the store decides whether the tenant owns the profile.
func (s profiles) owned(ctx context.Context, tenant, id string, version int32) (string, error) {
	t, err := s.tenantOf(ctx, tenant)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", errs.Invalid("id", "name the profile")
	}
	if version < 0 {
		return "", errs.Invalid("profileVersion", "want a version (1 or more), or 0 for every version, got %d", version)
	}
	return t, nil
}

// notRunning is INVALID_STATE when a running workflow deploys version of
// owner's profile id (any version when 0): the owner's by node, another
// tenant's (started while it was public, even if it is private now) only
// counted. A workflow of a tenant with its own profile of that id runs
// that one.
func (s profiles) notRunning(ctx context.Context, owner, id string, version int) error {
	query := fmt.Sprintf("ProfileId = %s AND ExecutionStatus = 'Running'", quoteQuery(id))
	if version > 0 {
		query += fmt.Sprintf(" AND ProfileVersion = %d", version)
	}
	var mine []string
	others := 0
	var token []byte
	for {
		resp, err := s.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.namespace, Query: query, NextPageToken: token, PageSize: 200})
		if err != nil {
			return errs.Wrap(errs.Unavailable, err, "list the workflows running profile %s from Temporal", quote(id))
		}
		for _, e := range resp.Executions {
			w := workflowOut(e)
			if w.TenantId == owner {
				mine = append(mine, fmt.Sprintf("%s (%s)", w.NodeId, w.WorkflowId))
				continue
			}
			// It runs owner's profile unless its tenant has one of that id
			// (its own shadows it); whatever owner's visibility is now.
			p, err := s.store.GetProfile(ctx, w.TenantId, id, 0)
			if err != nil && !errs.Is(err, errs.NotFound) {
				return err
			}
			if err != nil || p.TenantID != w.TenantId {
				others++
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	if len(mine)+others == 0 {
		return nil
	}
	return errs.New(errs.InvalidState, "profile %s is in use by running workflows: %s; wait for them or abort them first",
		quote(id), inUseText(mine, others))
}

// inUseText names the caller's own uses (at most ten) and counts others'.
func inUseText(mine []string, others int) string {
	const most = 10
	s := ""
	switch {
	case len(mine) > most:
		s = fmt.Sprintf("%s and %d more", strings.Join(mine[:most], ", "), len(mine)-most)
	case len(mine) > 0:
		s = strings.Join(mine, ", ")
	}
	if others > 0 {
		if s != "" {
			s += " and "
		}
		s += fmt.Sprintf("%d of other tenants", others)
	}
	return s
}
