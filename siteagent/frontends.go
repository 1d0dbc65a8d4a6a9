package siteagent

import (
	"encoding/json"
	"path/filepath"
	"slices"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
	"github.com/better-compute/better-compute/internal/frontends"
)

// temporalFrontends is the set of Temporal frontends the worker dials
// (those of the join or the last renewal), balanced over as serve does,
// so that the loss of one frontend is not the loss of the site's worker.
// It is made once, here, so that a renewal can update it live; addrs are
// its frontends now.
func (a *Agent) temporalFrontends() (set *frontends.Set, addrs []string) {
	a.id.mu.Lock()
	defer a.id.mu.Unlock()
	if a.frontends == nil {
		a.frontends = frontends.New(a.id.frontends())
	}
	return a.frontends, a.id.frontends()
}

// keepFrontends makes the frontends of a renewal answer the worker's,
// saved in join.json for the next start and given to the running worker's
// connection. An answer naming none (or the same) changes nothing.
func (a *Agent) keepFrontends(r *v1.JoinResponse) error {
	addrs := frontendsOf(r)
	a.id.mu.Lock()
	defer a.id.mu.Unlock()
	if len(addrs) == 0 || slices.Equal(addrs, a.id.frontends()) {
		return nil
	}
	j := a.id.joined
	j.TemporalAddress, j.TemporalAddresses = addrs[0], addrs
	if err := saveJoined(a.cfg.DataDir, j); err != nil {
		return err
	}
	a.id.joined = j
	if a.frontends != nil {
		a.frontends.Update(addrs)
	}
	a.log.Info("the site agent's Temporal frontends changed", "site", a.id.SiteID, "frontends", addrs)
	return nil
}

// saveJoined writes the join settings to join.json (0600: it holds the
// payload keys).
func saveJoined(dir string, j joined) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot encode the join settings")
	}
	return atomicfile.Write(filepath.Join(dir, JoinFile), b, 0o600)
}
