package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/userdata"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/provision"
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
