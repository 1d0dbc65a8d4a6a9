package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
)

// PublishedStep is one step a worker serves, as it published it: SiteID is
// the site whose agent announced it, "" for a control-plane worker, whose
// Worker names its plugins; Descriptor is the step's sdk.Descriptor as
// JSON.
type PublishedStep struct {
	SiteID      string
	Worker      string
	StepID      string
	Descriptor  []byte
	PublishedAt time.Time
}

// PublishSteps replaces, in one transaction, every step site siteID's
// agent published before (or, with siteID "", those the control-plane
// workers built with the same plugins, named by worker, published) with
// steps, each stored as its descriptor (Step.Describe), so a step the
// restarted worker no longer serves is gone.
func (s *Store) PublishSteps(ctx context.Context, siteID, worker string, steps []sdk.Step) error {
	const op = "store.PublishSteps"
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError(op, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Publishers of the same rows (two workers with the same plugins
	// starting at once) take turns: each deletes what the last committed.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('published_steps/' || $1 || '/' || $2))", siteID, worker); err != nil {
		return dbError(op, err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM published_steps WHERE site_id IS NOT DISTINCT FROM NULLIF($1, '') AND worker = $2", siteID, worker); err != nil {
		return dbError(op, err)
	}
	for _, st := range steps {
		d, err := json.Marshal(st.Describe())
		if err != nil {
			return errs.Wrap(errs.Internal, err, "describe step %s", st.ID).WithOp(op)
		}
		_, err = tx.Exec(ctx, "INSERT INTO published_steps (site_id, worker, step_id, descriptor) VALUES (NULLIF($1, ''), $2, $3, $4)",
			siteID, worker, st.ID, d)
		if constraint, _, fk := violated(err); fk && constraint == "published_steps_site_fk" {
			return notFound("site", siteID).WithOp(op)
		}
		if err != nil {
			return dbError(op, err)
		}
	}
	return dbError(op, tx.Commit(ctx))
}

// PublishedSteps returns the steps the control-plane workers published and
// those the agents of the tenants' sites announced, by site (the control
// plane's first), worker and step id.
func (s *Store) PublishedSteps(ctx context.Context, tenants []string) ([]PublishedStep, error) {
	const op = "store.PublishedSteps"
	rows, err := s.pool.Query(ctx, `
		SELECT COALESCE(p.site_id, ''), p.worker, p.step_id, p.descriptor, p.published_at FROM published_steps p
		LEFT JOIN sites s ON s.id = p.site_id
		WHERE p.site_id IS NULL OR s.tenant_id = ANY($1)
		ORDER BY COALESCE(p.site_id, ''), p.worker, p.step_id`, tenants)
	if err != nil {
		return nil, dbError(op, err)
	}
	out, err := collect(rows, func(r pgx.Row) (PublishedStep, error) {
		var p PublishedStep
		err := r.Scan(&p.SiteID, &p.Worker, &p.StepID, &p.Descriptor, &p.PublishedAt)
		return p, err
	})
	return out, dbError(op, err)
}
