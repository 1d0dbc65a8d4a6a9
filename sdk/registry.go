package sdk

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/better-compute/better-compute/provision"
)

// Registry is the steps and profiles a worker serves: the built-ins and its
// plugins'. It is built once at start and read-only after.
type Registry struct {
	steps    map[string]Step
	profiles []provision.Profile
	plugins  []string
}

var stepID = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)+$`)

// MaxTimeout bounds any step's timeout.
const MaxTimeout = 24 * time.Hour

// NewRegistry registers the plugins' steps and profiles, refusing a step id
// registered twice, a step without a timeout or with an unknown RunsOn, and
// a profile whose steps do not resolve against the registry itself.
func NewRegistry(plugins ...Plugin) (*Registry, error) {
	r := &Registry{steps: map[string]Step{}}
	for _, p := range plugins {
		if p.ID == "" {
			return nil, fmt.Errorf("a plugin needs an id")
		}
		if slices.Contains(r.plugins, p.ID) {
			return nil, fmt.Errorf("plugin %s is registered twice", p.ID)
		}
		r.plugins = append(r.plugins, p.ID)
		for _, s := range p.Steps {
			if err := s.check(); err != nil {
				return nil, fmt.Errorf("plugin %s: %w", p.ID, err)
			}
			if _, dup := r.steps[s.ID]; dup {
				return nil, fmt.Errorf("plugin %s: step %s is already registered", p.ID, s.ID)
			}
			r.steps[s.ID] = s
		}
	}
	for _, p := range plugins {
		for _, prof := range p.Profiles {
			if probs := prof.Validate(); len(probs) > 0 {
				return nil, fmt.Errorf("plugin %s: profile %s: %s: %s", p.ID, prof.ID, probs[0].Field, probs[0].Message)
			}
			if _, probs := r.Resolve(prof.Steps, nil); len(probs) > 0 {
				return nil, fmt.Errorf("plugin %s: profile %s: %s: %s", p.ID, prof.ID, probs[0].Field, probs[0].Message)
			}
			r.profiles = append(r.profiles, prof)
		}
	}
	return r, nil
}

func (s Step) check() error {
	if !stepID.MatchString(s.ID) {
		return fmt.Errorf("step id %q is not dotted lowerCamel words such as acme.renderIso", s.ID)
	}
	switch s.RunsOn {
	case ControlPlane, Site, Ramdisk:
	default:
		return fmt.Errorf("step %s: runsOn must be control-plane, site or ramdisk, got %q", s.ID, s.RunsOn)
	}
	if s.Timeout <= 0 || s.Timeout > MaxTimeout {
		return fmt.Errorf("step %s: a timeout from 1s to %s is required, got %s", s.ID, MaxTimeout, s.Timeout)
	}
	images := 0
	for _, f := range s.Input {
		if f.Type == Image {
			images++
		}
		if images > 1 {
			return fmt.Errorf("step %s: a step takes at most one input of type image", s.ID)
		}
		if f.Name == "" || f.Name == FromStepKey {
			return fmt.Errorf("step %s: an input field needs a name other than %q", s.ID, FromStepKey)
		}
		if f.Default != nil {
			if _, err := f.convert(f.Default); err != nil {
				return fmt.Errorf("step %s: the default of %s: %v", s.ID, f.Name, err)
			}
		}
	}
	return nil
}

// imageField is the name of the step's input of type Image, or "".
func (s Step) imageField() string {
	for _, f := range s.Input {
		if f.Type == Image {
			return f.Name
		}
	}
	return ""
}

// Step returns the step registered under id.
func (r *Registry) Step(id string) (Step, bool) {
	s, ok := r.steps[id]
	return s, ok
}

// Steps returns every registered step, by id.
func (r *Registry) Steps() []Step {
	out := make([]Step, 0, len(r.steps))
	for _, s := range r.steps {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Profiles returns the plugins' profiles.
func (r *Registry) Profiles() []provision.Profile { return slices.Clone(r.profiles) }

// Plugins returns the plugin ids, in registration order.
func (r *Registry) Plugins() []string { return slices.Clone(r.plugins) }

// Target is what Resolve checks a profile against beyond the registry: a
// node and its site. Nil fields are not checked.
type Target struct {
	// Agent is the node's pool's agent: "none" has no ramdisk.
	Agent string
	// VirtualMedia says whether the node's BMC driver has virtual media;
	// nil: not known.
	VirtualMedia *bool
	// BMCDriver names the driver, for messages.
	BMCDriver string
	// SiteID and SiteServes say which site steps the node's site runs;
	// SiteServes nil: not checked.
	SiteID     string
	SiteServes func(stepID string) bool
}

// PlannedStep is one step of a resolved profile: where it runs, its inputs
// after defaults, and the earlier step its fromStep names.
type PlannedStep struct {
	Index     int           `json:"index"`
	Use       string        `json:"use"`
	RunsOn    RunsOn        `json:"runsOn"`
	Timeout   time.Duration `json:"timeout"`
	RetrySafe bool          `json:"retrySafe"`
	Needs     []Need        `json:"needs,omitempty"`
	Relays    []string      `json:"relays,omitempty"`
	Sends     []string      `json:"sends,omitempty"`
	With      Values        `json:"with,omitempty"`
	FromStep  string        `json:"fromStep,omitempty"`
	// FromFields are the inputs read from FromStep's outputs when the step
	// runs (the FromStep fields with left out).
	FromFields []string `json:"fromFields,omitempty"`
	// Image is the input of type Image, if any: the workflow pins that
	// image at the node's site before the step runs.
	Image string `json:"image,omitempty"`
}

// Plan is a resolved profile.
type Plan struct {
	Steps []PlannedStep `json:"steps"`
}

// Resolve resolves a profile's steps: each must be registered, with inputs
// its manifest takes, a fromStep naming an earlier step that outputs every
// field read from it, its After steps earlier, and (with a target) needs
// the node meets and a site that serves it. Every problem is returned,
// each naming its field (steps[i].use, steps[i].with.x).
func (r *Registry) Resolve(steps []provision.Step, t *Target) (Plan, []Problem) {
	var plan Plan
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for i, ps := range steps {
		f := fmt.Sprintf("steps[%d]", i)
		s, ok := r.steps[ps.Use]
		if !ok {
			add(f+".use", "unknown step %q: registered steps are %s", ps.Use, strings.Join(r.ids(), ", "))
			continue
		}
		if s.Lifecycle {
			add(f+".use", "%s is one of the lifecycle's own commands, which its workflows send with inputs they make; a profile cannot use it (profile steps are %s)",
				s.ID, strings.Join(r.ids(), ", "))
			continue
		}
		if ps.On != "" && RunsOn(ps.On) != s.RunsOn && !(s.RunsOn == Ramdisk && ps.On == string(Site)) {
			add(f+".on", "%s runs on %s, not %s", s.ID, s.RunsOn, ps.On)
		}
		vals, probs := s.Input.Resolve(f, ps.With)
		out = append(out, probs...)
		for _, a := range s.After {
			if !seen[a] {
				add(f+".use", "%s needs a %s before it", s.ID, a)
			}
		}
		from := ""
		if vals != nil {
			from = vals.String(FromStepKey)
			delete(vals, FromStepKey)
		}
		var fromFields []string
		if from != "" {
			fromFields = s.fromFields(ps.With)
			out = append(out, r.checkFrom(f, s, from, fromFields, seen)...)
		}
		if t != nil {
			out = append(out, s.checkTarget(f, t)...)
		}
		seen[s.ID] = true
		plan.Steps = append(plan.Steps, PlannedStep{Index: i, Use: s.ID, RunsOn: s.RunsOn, Timeout: s.Timeout,
			RetrySafe: s.RetrySafe, Needs: s.needs(), Relays: s.Relays, Sends: s.Sends, With: vals, FromStep: from,
			FromFields: fromFields, Image: s.imageField()})
	}
	if len(out) > 0 {
		return Plan{}, out
	}
	return plan, nil
}

// fromFields are the inputs marked FromStep that with leaves out.
func (s Step) fromFields(with map[string]any) []string {
	var out []string
	for _, in := range s.Input {
		if _, given := with[in.Name]; in.FromStep && !given {
			out = append(out, in.Name)
		}
	}
	return out
}

func (r *Registry) checkFrom(f string, s Step, from string, read []string, seen map[string]bool) []Problem {
	field := f + ".with." + FromStepKey
	if !seen[from] {
		if _, known := r.steps[from]; known {
			return []Problem{{field, fmt.Sprintf("fromStep %q must name a step earlier in the profile", from)}}
		}
		return []Problem{{field, fmt.Sprintf("fromStep %q names no step of the profile", from)}}
	}
	src := r.steps[from]
	var out []Problem
	for _, name := range read {
		if !slices.Contains(src.Outputs, name) {
			out = append(out, Problem{field, fmt.Sprintf("%s reads %s from %s, whose outputs are %s",
				s.ID, name, from, listOrNone(src.Outputs))})
		}
	}
	if len(read) == 0 {
		out = append(out, Problem{field, fmt.Sprintf("%s reads nothing from an earlier step here", s.ID)})
	}
	return out
}

// needs are the step's Needs, with the ramdisk for a step that runs on it
// whether its Needs say so or not.
func (s Step) needs() []Need {
	if s.RunsOn == Ramdisk && !slices.Contains(s.Needs, NeedsRamdisk) {
		return append(slices.Clone(s.Needs), NeedsRamdisk)
	}
	return s.Needs
}

func (s Step) checkTarget(f string, t *Target) []Problem {
	var out []Problem
	for _, n := range s.needs() {
		switch {
		case n == NeedsRamdisk && t.Agent == "none":
			out = append(out, Problem{f + ".use", fmt.Sprintf("%s needs the ramdisk, and the node's pool runs no agent (agent: none)", s.ID)})
		case n == NeedsVirtualMedia && t.VirtualMedia != nil && !*t.VirtualMedia:
			out = append(out, Problem{f + ".use", fmt.Sprintf("%s needs virtual media, which the node's %s BMC does not have", s.ID, t.BMCDriver)})
		}
	}
	if s.RunsOn != ControlPlane && t.SiteServes != nil && !t.SiteServes(s.ID) {
		out = append(out, Problem{f + ".use", fmt.Sprintf("no agent of site %s serves %s: run a bcd site built with the plugin that registers it", t.SiteID, s.ID)})
	}
	return out
}

// ids are the ids of the steps a profile may use (not the Lifecycle ones).
func (r *Registry) ids() []string {
	out := make([]string, 0, len(r.steps))
	for id, s := range r.steps {
		if !s.Lifecycle {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
