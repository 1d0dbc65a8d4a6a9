package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// registry is the steps this control plane runs: a.Steps, or the built-ins.
func (a *Activities) registry() (*sdk.Registry, error) {
	if a.Steps != nil {
		return a.Steps, nil
	}
	return steps.Registry()
}

// RegisterSteps registers the Run of every control-plane step of the
// registry as the activity named by its id; a control-plane step without a
// Run is an error naming it, before the worker starts.
func (a *Activities) RegisterSteps(r worker.ActivityRegistry) error {
	reg, err := a.registry()
	if err != nil {
		return err
	}
	for _, s := range reg.Steps() {
		if s.RunsOn != sdk.ControlPlane {
			continue
		}
		if s.Run == nil {
			return fmt.Errorf("control-plane step %s has no Run: its plugin must give one", s.ID)
		}
		r.RegisterActivityWithOptions(a.StepActivity(s), activity.RegisterOptions{Name: s.ID})
	}
	return nil
}

// StepActivity wraps a control-plane step's Run as its activity: its
// Context gets the node, the run, the earlier steps' outputs, SQL, PKI and
// Artifacts; its error is mapped by steps.Run (NotReady: retried after
// its delay; a failure of a step not RetrySafe: final).
func (a *Activities) StepActivity(s sdk.Step) func(context.Context, sdk.Call) (sdk.Values, error) {
	return func(ctx context.Context, c sdk.Call) (sdk.Values, error) {
		sc := &sdk.Context{Node: c.Node, Step: c.Step, WorkflowID: c.WorkflowID, RunID: c.RunID, From: c.From,
			SQL: a.sql(), PKI: a.PKI, Artifacts: a.Artifacts}
		if sc.PKI == nil {
			sc.PKI = noPKI{}
		}
		if sc.Artifacts == nil {
			sc.Artifacts = noArtifacts{}
		}
		return steps.Run(ctx, s, sc, c.With)
	}
}

// PlanProfile resolves a stored profile against the registry for the
// deploy workflow, which runs the plan from this result in its history.
// A profile that does not resolve is INVALID_INPUT naming every problem.
func PlanProfile(reg *sdk.Registry, doc provision.Profile) (kinds.Profile, error) {
	out := kinds.Profile{ID: doc.ID, Version: doc.Version, Role: doc.Role}
	for _, s := range doc.Steps {
		out.Steps = append(out.Steps, kinds.ProfileStep{Use: s.Use, With: s.With})
	}
	plan, probs := reg.Resolve(doc.Steps, nil)
	if len(probs) > 0 {
		var msgs []string
		for _, p := range probs {
			msgs = append(msgs, p.Field+": "+p.Message)
		}
		return kinds.Profile{}, errs.Invalid(probs[0].Field, "profile %s v%d does not resolve: %s", doc.ID, doc.Version,
			strings.Join(msgs, "; "))
	}
	out.Plan = &plan
	return out, nil
}

func (a *Activities) sql() sdk.SQL {
	if a.Store == nil {
		return noSQL{}
	}
	return pool{a.Store.Pool()}
}

// pool is the control plane's PostgreSQL as a step sees it.
type pool struct{ p *pgxpool.Pool }

func (p pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.p.Query(ctx, sql, args...)
}

func (p pool) Transaction(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, p.p, fn)
}

// noSQL, noPKI and noArtifacts stand in for what this control plane was
// started without: a step that uses them fails UNSUPPORTED saying so.
type (
	noSQL       struct{}
	noPKI       struct{}
	noArtifacts struct{}
)

func (noSQL) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errs.New(errs.Unsupported, "this worker has no database for steps (SQL)")
}

func (noSQL) Transaction(context.Context, func(pgx.Tx) error) error {
	return errs.New(errs.Unsupported, "this worker has no database for steps (SQL)")
}

func (noPKI) IssueJoinToken(context.Context, pgx.Tx, sdk.Node, sdk.JoinTokenRequest) (sdk.JoinToken, error) {
	return sdk.JoinToken{}, errs.New(errs.Unsupported, "this control plane issues no join tokens to steps (PKI): run `better-compute pki init`")
}

func (noArtifacts) Publish(context.Context, pgx.Tx, sdk.Node, string, []byte, time.Duration) (string, error) {
	return "", errs.New(errs.Unsupported, "this control plane publishes no per-node artifacts for steps (Artifacts)")
}
