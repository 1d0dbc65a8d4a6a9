package sdk

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/provision"
)

func testPlugin() Plugin {
	return Plugin{ID: "acme", Steps: []Step{
		{ID: "acme.render", RunsOn: ControlPlane, Timeout: time.Minute, Outputs: []string{"url"}},
		{ID: "acme.write", RunsOn: Ramdisk, Timeout: time.Minute, Needs: []Need{NeedsRamdisk}},
		{ID: "acme.boot", RunsOn: Ramdisk, Timeout: time.Minute, After: []string{"acme.write"}},
		{ID: "acme.insert", RunsOn: Site, Timeout: time.Minute, Needs: []Need{NeedsVirtualMedia},
			Input: Manifest{{Name: "url", Type: String, Required: true, FromStep: true}, {Name: "name", Type: String, FromStep: true}}},
	}}
}

func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := NewRegistry(testPlugin())
	if err != nil {
		t.Fatalf("NewRegistry = %v", err)
	}
	return r
}

// problemFields lists the fields of probs.
func problemFields(probs []Problem) []string {
	var out []string
	for _, p := range probs {
		out = append(out, p.Field)
	}
	return out
}

func TestRegistryResolve(t *testing.T) {
	r := newTestRegistry(t)
	no := false
	cases := []struct {
		name   string
		steps  []provision.Step
		target *Target
		want   []string // problem fields
		msg    string   // in the first problem's message
	}{
		{"unknown step", []provision.Step{{Use: "acme.nope"}}, nil, []string{"steps[0].use"}, `unknown step "acme.nope"`},
		{"after missing", []provision.Step{{Use: "acme.boot"}}, nil, []string{"steps[0].use"}, "needs a acme.write before it"},
		{"after met", []provision.Step{{Use: "acme.write"}, {Use: "acme.boot"}}, nil, nil, ""},
		{"fromStep later", []provision.Step{{Use: "acme.insert", With: map[string]any{"fromStep": "acme.render"}}, {Use: "acme.render"}},
			nil, []string{"steps[0].with.fromStep"}, "must name a step earlier"},
		{"fromStep unknown", []provision.Step{{Use: "acme.insert", With: map[string]any{"fromStep": "acme.x"}}},
			nil, []string{"steps[0].with.fromStep"}, "names no step of the profile"},
		{"fromStep missing output", []provision.Step{{Use: "acme.write"}, {Use: "acme.insert", With: map[string]any{"fromStep": "acme.write"}}},
			nil, []string{"steps[1].with.fromStep", "steps[1].with.fromStep"}, "reads url from acme.write, whose outputs are none"},
		{"fromStep with the fields given", []provision.Step{{Use: "acme.render"},
			{Use: "acme.insert", With: map[string]any{"fromStep": "acme.render", "url": "u", "name": "n"}}},
			nil, []string{"steps[1].with.fromStep"}, "reads nothing"},
		{"needs virtual media", []provision.Step{{Use: "acme.insert", With: map[string]any{"url": "u"}}},
			&Target{VirtualMedia: &no, BMCDriver: "ipmi"}, []string{"steps[0].use"}, "the node's ipmi BMC does not have"},
		{"needs ramdisk", []provision.Step{{Use: "acme.write"}}, &Target{Agent: "none"}, []string{"steps[0].use"}, "agent: none"},
		{"site serves", []provision.Step{{Use: "acme.render"}, {Use: "acme.write"}},
			&Target{SiteID: "site_1", SiteServes: func(id string) bool { return id != "acme.write" }},
			[]string{"steps[1].use"}, "no agent of site site_1 serves acme.write"},
		{"on a wrong place", []provision.Step{{Use: "acme.render", On: "site"}}, nil, []string{"steps[0].on"}, "runs on control-plane"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, probs := r.Resolve(tc.steps, tc.target)
			if diff := cmp.Diff(tc.want, problemFields(probs)); diff != "" {
				t.Fatalf("Resolve problems (-want +got):\n%s\n%v", diff, probs)
			}
			if len(probs) > 0 && !strings.Contains(probs[0].Message, tc.msg) {
				t.Errorf("Resolve problem = %q, want it to say %q", probs[0].Message, tc.msg)
			}
			if len(probs) > 0 && len(plan.Steps) != 0 {
				t.Errorf("Resolve with problems returned a plan of %d steps", len(plan.Steps))
			}
		})
	}
}

func TestRegistryResolvePlan(t *testing.T) {
	r := newTestRegistry(t)
	yes := true
	plan, probs := r.Resolve([]provision.Step{{Use: "acme.render"},
		{Use: "acme.insert", With: map[string]any{"fromStep": "acme.render", "name": "n"}}},
		&Target{VirtualMedia: &yes, SiteServes: func(string) bool { return true }})
	if len(probs) > 0 {
		t.Fatalf("Resolve = %v", probs)
	}
	want := Plan{Steps: []PlannedStep{
		{Index: 0, Use: "acme.render", RunsOn: ControlPlane, Timeout: time.Minute, With: Values{}},
		{Index: 1, Use: "acme.insert", RunsOn: Site, Timeout: time.Minute, Needs: []Need{NeedsVirtualMedia},
			With: Values{"name": "n"}, FromStep: "acme.render", FromFields: []string{"url"}},
	}}
	if diff := cmp.Diff(want, plan); diff != "" {
		t.Errorf("Resolve plan (-want +got):\n%s", diff)
	}
}

func TestNewRegistryRefuses(t *testing.T) {
	run := func(context.Context, *Context, Values) (Values, error) { return nil, nil }
	ok := Step{ID: "acme.ok", RunsOn: Site, Timeout: time.Minute, Run: run}
	cases := []struct {
		name    string
		plugins []Plugin
		want    string
	}{
		{"duplicate step", []Plugin{{ID: "a", Steps: []Step{ok}}, {ID: "b", Steps: []Step{ok}}}, "step acme.ok is already registered"},
		{"duplicate plugin", []Plugin{{ID: "a"}, {ID: "a"}}, "plugin a is registered twice"},
		{"no plugin id", []Plugin{{}}, "needs an id"},
		{"bad step id", []Plugin{{ID: "a", Steps: []Step{{ID: "Bad", RunsOn: Site, Timeout: time.Minute}}}}, "dotted lowerCamel"},
		{"no timeout", []Plugin{{ID: "a", Steps: []Step{{ID: "a.b", RunsOn: Site}}}}, "a timeout"},
		{"bad runsOn", []Plugin{{ID: "a", Steps: []Step{{ID: "a.b", RunsOn: "moon", Timeout: time.Minute}}}}, "runsOn"},
		{"bad default", []Plugin{{ID: "a", Steps: []Step{{ID: "a.b", RunsOn: Site, Timeout: time.Minute,
			Input: Manifest{{Name: "n", Type: Int, Default: "x"}}}}}}, "the default of n"},
		{"two images", []Plugin{{ID: "a", Steps: []Step{{ID: "a.b", RunsOn: Site, Timeout: time.Minute,
			Input: Manifest{{Name: "x", Type: Image}, {Name: "y", Type: Image}}}}}}, "at most one input of type image"},
		{"profile that does not resolve", []Plugin{{ID: "a", Steps: []Step{ok}, Profiles: []provision.Profile{{ID: "p", Version: 1,
			Target: "metal", Role: "host", Steps: []provision.Step{{Use: "acme.nope"}}}}}}, "profile p: steps[0].use"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRegistry(tc.plugins...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewRegistry = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestNotReady(t *testing.T) {
	d, ok := IsNotReady(NotReady(3 * time.Second))
	if !ok || d != 3*time.Second {
		t.Errorf("IsNotReady(NotReady(3s)) = %v, %v", d, ok)
	}
	if _, ok := IsNotReady(context.Canceled); ok {
		t.Errorf("IsNotReady(context.Canceled) = true")
	}
}
