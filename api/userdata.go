package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/userdata"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/store"
)

// userDataProblems checks each deploy.image's userDataRef as the control
// plane renders it (internal/userdata): a secret of the profile's owner
// that exists, holds a userData template, and renders; so a deploy whose
// user data cannot be rendered is refused before its node moves. Only
// the problem's shape is said, never the template.
func (s *Server) userDataProblems(ctx context.Context, owner string, steps []provision.Step) ([]provision.Problem, error) {
	var out []provision.Problem
	for i, ps := range steps {
		ref, _ := ps.With[userdata.Field].(string)
		if ps.Use != kinds.DeployImage || ref == "" {
			continue
		}
		f := fmt.Sprintf("steps[%d].with.%s", i, userdata.Field)
		err := s.checkUserData(ctx, f, owner, ref)
		var e *errs.Error
		switch {
		case err == nil:
		case errors.As(err, &e) && e.Kind == errs.InvalidInput:
			out = append(out, provision.Problem{Field: f, Message: e.Msg})
		default:
			return nil, err
		}
	}
	return out, nil
}

// publicUserData names each deploy.image step that carries a userDataRef,
// for a profile that is or becomes public: the template is a secret of the
// owner, which another tenant's deploy would render onto its own machine,
// so making a profile public must not share it.
func publicUserData(steps []provision.Step) []provision.Problem {
	var out []provision.Problem
	for i, ps := range steps {
		if ref, _ := ps.With[userdata.Field].(string); ps.Use == kinds.DeployImage && ref != "" {
			out = append(out, provision.Problem{Field: fmt.Sprintf("steps[%d].with.%s", i, userdata.Field),
				Message: "a public profile cannot carry a tenant's secret as its user data: keep the profile private or drop the userDataRef"})
		}
	}
	return out
}

// noPublicUserData is INVALID_INPUT naming the first step publicUserData
// finds in each stored profile.
func noPublicUserData(ps []store.Profile) error {
	for _, p := range ps {
		var doc provision.Profile
		if err := json.Unmarshal(p.Document, &doc); err != nil {
			return fmt.Errorf("stored profile %s v%d does not decode: %w", p.ID, p.Version, err)
		}
		if probs := publicUserData(doc.Steps); len(probs) > 0 {
			return errs.Invalid("profile."+probs[0].Field, "profile %s v%d: %s", p.ID, p.Version, probs[0].Message)
		}
	}
	return nil
}

func (s *Server) checkUserData(ctx context.Context, field, owner, ref string) error {
	name, err := userdata.ParseRef(field, ref, owner)
	if err != nil {
		return err
	}
	value, err := s.store.OpenSecret(ctx, owner, name)
	if errs.Is(err, errs.NotFound) {
		return errs.Invalid(field, "secret %s does not exist (put the user-data template with secrets put)", ref)
	} else if err != nil {
		return err
	}
	tmpl, err := userdata.Template(field, value)
	if err != nil {
		return err
	}
	return userdata.Check(field, tmpl)
}
