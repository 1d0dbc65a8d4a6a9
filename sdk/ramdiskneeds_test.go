package sdk

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/provision"
)

// TestRamdiskStepNeedsRamdisk: a step that runs on the ramdisk needs it
// whether or not its Needs say so - refused on an agent: none pool before
// anything runs, and the workflow boots the ramdisk for it.
func TestRamdiskStepNeedsRamdisk(t *testing.T) {
	t.Parallel()
	r, err := NewRegistry(Plugin{ID: "acme", Steps: []Step{{ID: "acme.flash", RunsOn: Ramdisk, Timeout: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	steps := []provision.Step{{Use: "acme.flash"}}
	if _, probs := r.Resolve(steps, &Target{Agent: "none"}); len(probs) != 1 || probs[0].Field != "steps[0].use" ||
		!strings.Contains(probs[0].Message, "agent: none") {
		t.Errorf("Resolve(a ramdisk step, agent none) = %v, want one problem at steps[0].use naming agent: none", probs)
	}
	plan, probs := r.Resolve(steps, nil)
	if len(probs) > 0 || !slices.Contains(plan.Steps[0].Needs, NeedsRamdisk) {
		t.Errorf("Resolve(a ramdisk step) = %+v, %v; want a plan whose step needs the ramdisk", plan, probs)
	}
}
