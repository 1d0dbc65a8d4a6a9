package api

import (
	"context"
	"fmt"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// published is what the running workers serve, as the API resolves a
// tenant's profiles against it.
type published struct {
	// reg is the API's own steps (built-ins and its plugins) and the
	// published steps it lacks.
	reg *sdk.Registry
	// controlPlane is what the control-plane workers published; nil: none
	// published anything (a worker from before), not checked.
	controlPlane map[string]bool
	// sites is what each site's agent announced, by site id; a site absent
	// from it announced no steps (an agent from before), not checked.
	sites map[string]map[string]bool
}

// publishedSteps reads what the control-plane workers and the agents of
// the tenant's own sites (where its nodes are, never another tenant's)
// published, and builds the registry its profiles are resolved against.
func (s *Server) publishedSteps(ctx context.Context, tenant string) (published, error) {
	rows, err := s.store.PublishedSteps(ctx, []string{tenant})
	if err != nil {
		return published{}, err
	}
	p := published{sites: map[string]map[string]bool{}}
	var lacking []sdk.Step
	have := map[string]bool{}
	for _, r := range rows {
		if r.SiteID == "" {
			if p.controlPlane == nil {
				p.controlPlane = map[string]bool{}
			}
			p.controlPlane[r.StepID] = true
		} else {
			if p.sites[r.SiteID] == nil {
				p.sites[r.SiteID] = map[string]bool{}
			}
			p.sites[r.SiteID][r.StepID] = true
		}
		if _, own := s.steps.Step(r.StepID); own || have[r.StepID] {
			continue
		}
		st, err := sdk.DecodeDescriptor(r.Descriptor)
		if err != nil { // checked when it was published: a descriptor of another version
			s.log.WarnContext(ctx, "a published step descriptor does not decode; not resolving against it", "site", r.SiteID, "step", r.StepID, "err", err)
			continue
		}
		have[r.StepID] = true
		lacking = append(lacking, st)
	}
	p.reg, err = sdk.NewRegistry(sdk.Plugin{ID: "api", Steps: s.steps.Steps()}, sdk.Plugin{ID: "published", Steps: lacking})
	if err != nil {
		return published{}, errs.Wrap(errs.Internal, err, "the registry of the published steps")
	}
	return p, nil
}

// resolveFor resolves owner's profile as tenant runs it (owner is tenant
// but for another tenant's public profile) against the steps the running
// workers serve: its shape, its steps (sdk.Registry.Resolve: unknown
// steps, bad inputs, fromStep, and with a target what the node cannot
// do), the workers of tenant's sites that serve each step, and the
// catalog images and user data it names, which are owner's. Every problem
// is returned, each naming its field (steps[i].use…); with none, the plan
// (what profiles render shows). Create, validate, render and the deploy
// check all resolve here.
func (s *Server) resolveFor(ctx context.Context, tenant, owner string, doc provision.Profile, t *sdk.Target) (sdk.Plan, []provision.Problem, error) {
	out := doc.Validate()
	if len(out) > 0 {
		return sdk.Plan{}, out, nil
	}
	p, err := s.publishedSteps(ctx, tenant)
	if err != nil {
		return sdk.Plan{}, nil, err
	}
	if t != nil && t.SiteID != "" && p.sites[t.SiteID] != nil {
		served := p.sites[t.SiteID]
		t.SiteServes = func(id string) bool { return served[id] }
	}
	plan, probs := p.reg.Resolve(doc.Steps, t)
	for _, pr := range probs {
		out = append(out, provision.Problem{Field: pr.Field, Message: pr.Message})
	}
	out = append(out, p.unserved(doc.Steps, t)...)
	images, err := s.missingImages(ctx, owner, p.reg, doc.Steps)
	if out = append(out, images...); err != nil {
		return sdk.Plan{}, out, err
	}
	// Another tenant's public profile stored with user data before
	// publicUserData refused it: its owner's secret is not rendered for tenant.
	userData := publicUserData(doc.Steps)
	if tenant == owner {
		userData, err = s.userDataProblems(ctx, owner, doc.Steps)
	}
	if out = append(out, userData...); err != nil || len(out) > 0 {
		return sdk.Plan{}, out, err
	}
	return plan, nil, nil
}

// unserved names the steps no running worker serves: a control-plane step
// no control-plane worker published, and (without a node) a site
// or ramdisk step no site's agent announced; with a node, Resolve checked
// its own site.
func (p published) unserved(steps []provision.Step, t *sdk.Target) []provision.Problem {
	var out []provision.Problem
	for i, ps := range steps {
		st, ok := p.reg.Step(ps.Use)
		if !ok {
			continue
		}
		f := fmt.Sprintf("steps[%d].use", i)
		switch {
		case st.RunsOn == sdk.ControlPlane:
			if p.controlPlane != nil && !p.controlPlane[st.ID] {
				out = append(out, provision.Problem{Field: f, Message: fmt.Sprintf(
					"no control-plane worker serves %s: run a worker built with the plugin that registers it", st.ID)})
			}
		case t == nil && len(p.sites) > 0 && !p.anySite(st.ID):
			out = append(out, provision.Problem{Field: f, Message: fmt.Sprintf(
				"no site agent serves %s: run a bcd site built with the plugin that registers it", st.ID)})
		}
	}
	return out
}

func (p published) anySite(id string) bool {
	for _, served := range p.sites {
		if served[id] {
			return true
		}
	}
	return false
}

// missingImages names the catalog images (the steps' inputs of type image)
// that the tenant (the profile's owner) does not have.
func (s *Server) missingImages(ctx context.Context, tenant string, reg *sdk.Registry, steps []provision.Step) ([]provision.Problem, error) {
	var out []provision.Problem
	for i, ps := range steps {
		st, ok := reg.Step(ps.Use)
		if !ok {
			continue
		}
		for _, f := range st.Input {
			img, _ := ps.With[f.Name].(string)
			if f.Type != sdk.Image || img == "" {
				continue
			}
			if _, err := s.store.GetImage(ctx, tenant, img); errs.Is(err, errs.NotFound) {
				out = append(out, provision.Problem{Field: fmt.Sprintf("steps[%d].with.%s", i, f.Name),
					Message: fmt.Sprintf("image %s is not in the catalog (register it with images.register)", img)})
			} else if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// PublishControlPlaneSteps publishes the control-plane steps of reg, the
// registry a control plane's worker runs (nil: the built-ins), replacing
// what a worker with the same plugins published before, so profiles are
// resolved against them; the worker calls it at each start. Workers built
// with other plugins (a plugin author's beside serve) keep theirs.
func PublishControlPlaneSteps(ctx context.Context, st *store.Store, reg *sdk.Registry) error {
	if reg == nil {
		reg = builtins
	}
	var cp []sdk.Step
	for _, s := range reg.Steps() {
		if s.RunsOn == sdk.ControlPlane {
			cp = append(cp, s)
		}
	}
	return st.PublishSteps(ctx, "", strings.Join(reg.Plugins(), ","), cp)
}

// targetOf is what a profile is checked against before a verb runs it on
// node n of pool: the pool's agent, the BMC driver's virtual media, the
// node's site.
func targetOf(n store.Node, pool store.Pool) *sdk.Target {
	return &sdk.Target{Agent: pool.Agent, VirtualMedia: virtualMedia(n.BMCDriver), BMCDriver: n.BMCDriver, SiteID: n.SiteID}
}

// virtualMedia says whether a BMC driver has virtual media (bmc.Media):
// Redfish does, IPMI does not; nil for a driver not known here.
func virtualMedia(driver string) *bool {
	var has bool
	switch driver {
	case bmc.DriverRedfish:
		has = true
	case bmc.DriverIPMI:
	default:
		return nil
	}
	return &has
}
