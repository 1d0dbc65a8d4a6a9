package api

import (
	"context"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/store"
)

type profiles struct{ *Server }

func (s profiles) Create(ctx context.Context, req *connect.Request[v1.CreateProfileRequest]) (*connect.Response[v1.CreateProfileResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	if req.Msg.Profile == nil {
		return nil, errs.Invalid("profile", "the profile document is missing")
	}
	doc := profileIn(req.Msg.Profile)
	_, problems, err := s.resolveFor(ctx, t, t, doc, nil)
	if err != nil {
		return nil, err
	}
	if doc.Visibility == store.Public {
		problems = append(publicUserData(doc.Steps), problems...)
	}
	if len(problems) > 0 {
		return nil, errs.Invalid("profile."+problems[0].Field, "%s", problems[0].Message)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, errs.Invalid("profile", "the profile document does not encode: %v", err)
	}
	p := store.Profile{TenantID: t, ID: doc.ID, Version: doc.Version, Document: b, Visibility: doc.Visibility}
	if err := s.store.CreateProfile(ctx, p); err != nil {
		return nil, err
	}
	p.CreatedAt = s.now()
	out, err := profileOut(p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.CreateProfileResponse{Profile: out}), nil
}

func (s profiles) Get(ctx context.Context, req *connect.Request[v1.GetProfileRequest]) (*connect.Response[v1.GetProfileResponse], error) {
	_, p, err := s.load(ctx, req.Msg.TenantId, req.Msg.Id, req.Msg.Version)
	if err != nil {
		return nil, err
	}
	out, err := profileOut(p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.GetProfileResponse{Profile: out}), nil
}

func (s profiles) List(ctx context.Context, req *connect.Request[v1.ListProfilesRequest]) (*connect.Response[v1.ListProfilesResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListProfiles(ctx, t)
	if err != nil {
		return nil, err
	}
	out := &v1.ListProfilesResponse{}
	for _, p := range list {
		o, err := profileOut(p)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, o)
	}
	return connect.NewResponse(out), nil
}

// Validate checks a stored profile the tenant may read as its deploy
// would: its shape, its steps resolved against the steps the running
// workers serve on the tenant's sites, and the images and user data it
// names in its owner's catalog (resolveFor).
func (s profiles) Validate(ctx context.Context, req *connect.Request[v1.ValidateProfileRequest]) (*connect.Response[v1.ValidateProfileResponse], error) {
	if req.Msg.ProfileVersion < 1 {
		return nil, errs.Invalid("profileVersion", "want the version to validate (1 or more), got %d", req.Msg.ProfileVersion)
	}
	t, p, err := s.load(ctx, req.Msg.TenantId, req.Msg.Id, req.Msg.ProfileVersion)
	if err != nil {
		return nil, err
	}
	var doc provision.Profile
	if err := json.Unmarshal(p.Document, &doc); err != nil {
		return nil, fmt.Errorf("stored profile %s v%d does not decode: %w", p.ID, p.Version, err)
	}
	_, problems, err := s.resolveFor(ctx, t, p.TenantID, doc, nil)
	if err != nil {
		return nil, err
	}
	out := &v1.ValidateProfileResponse{Valid: true}
	for _, pr := range problems {
		out.Valid = false
		out.Problems = append(out.Problems, &v1.ValidationProblem{Field: pr.Field, Message: pr.Message})
	}
	return connect.NewResponse(out), nil
}

// load returns the caller's tenant and the profile it may read.
func (s profiles) load(ctx context.Context, tenant, id string, version int32) (string, store.Profile, error) {
	t, err := s.tenantOf(ctx, tenant)
	if err != nil {
		return "", store.Profile{}, err
	}
	if id == "" {
		return "", store.Profile{}, errs.Invalid("id", "name the profile")
	}
	p, err := s.store.GetProfile(ctx, t, id, int(version))
	return t, p, err
}

func profileIn(p *v1.Profile) provision.Profile {
	doc := provision.Profile{ID: p.Id, Version: int(p.Version), Target: p.Target, Role: p.Role, Visibility: p.Visibility}
	for _, st := range p.Steps {
		doc.Steps = append(doc.Steps, provision.Step{Use: st.Use, On: st.On, With: st.With.AsMap()})
	}
	return doc
}

func profileOut(p store.Profile) (*v1.Profile, error) {
	var doc provision.Profile
	if err := json.Unmarshal(p.Document, &doc); err != nil {
		return nil, fmt.Errorf("stored profile %s v%d does not decode: %w", p.ID, p.Version, err)
	}
	out := &v1.Profile{Id: doc.ID, Version: int32(doc.Version), Target: doc.Target, Role: doc.Role,
		Visibility: p.Visibility, TenantId: p.TenantID, CreatedAt: timestamppb.New(p.CreatedAt)}
	for _, st := range doc.Steps {
		w, err := structpb.NewStruct(st.With)
		if err != nil {
			return nil, fmt.Errorf("stored profile %s v%d step %s: %w", p.ID, p.Version, st.Use, err)
		}
		if len(st.With) == 0 {
			w = nil
		}
		out.Steps = append(out.Steps, &v1.ProfileStep{Use: st.Use, On: st.On, With: w})
	}
	return out, nil
}
