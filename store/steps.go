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
// the site whose agent announced it, "" for the control plane's worker;
// Descriptor is the step's sdk.Descriptor as JSON.
type PublishedStep struct {
	SiteID      string
	StepID      string
	Descriptor  []byte
	PublishedAt time.Time
}

// PublishSteps replaces, in one transaction, every step site siteID's
// agent (or, for "", the control plane's worker) published before with
// steps, each stored as its descriptor (Step.Describe), so a step the
// restarted worker no longer serves is gone.
func (s *Store) PublishSteps(ctx context.Context, siteID string, steps []sdk.Step) error {
	const op = "store.PublishSteps"
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError(op, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "DELETE FROM published_steps WHERE site_id IS NOT DISTINCT FROM NULLIF($1, '')", siteID); err != nil {
		return dbError(op, err)
	}
	for _, st := range steps {
		d, err := json.Marshal(st.Describe())
		if err != nil {
			return errs.Wrap(errs.Internal, err, "describe step %s", st.ID).WithOp(op)
		}
		_, err = tx.Exec(ctx, "INSERT INTO published_steps (site_id, step_id, descriptor) VALUES (NULLIF($1, ''), $2, $3)",
			siteID, st.ID, d)
		if constraint, _, fk := violated(err); fk && constraint == "published_steps_site_fk" {
			return notFound("site", siteID).WithOp(op)
		}
		if err != nil {
			return dbError(op, err)
		}
	}
	return dbError(op, tx.Commit(ctx))
}

// PublishedSteps returns the steps the control plane's worker published
// and those the agents of the tenants' sites announced, by site (the
// control plane's first) and step id.
func (s *Store) PublishedSteps(ctx context.Context, tenants []string) ([]PublishedStep, error) {
	const op = "store.PublishedSteps"
	rows, err := s.pool.Query(ctx, `
		SELECT COALESCE(p.site_id, ''), p.step_id, p.descriptor, p.published_at FROM published_steps p
		LEFT JOIN sites s ON s.id = p.site_id
		WHERE p.site_id IS NULL OR s.tenant_id = ANY($1)
		ORDER BY COALESCE(p.site_id, ''), p.step_id`, tenants)
	if err != nil {
		return nil, dbError(op, err)
	}
	out, err := collect(rows, func(r pgx.Row) (PublishedStep, error) {
		var p PublishedStep
		err := r.Scan(&p.SiteID, &p.StepID, &p.Descriptor, &p.PublishedAt)
		return p, err
	})
	return out, dbError(op, err)
}
