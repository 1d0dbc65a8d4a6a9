package workflows_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestVerbTable spells out the spec's verbs: the states each may start
// from, its workflow and profile.
func TestVerbTable(t *testing.T) {
	want := map[nodestate.Verb]string{
		nodestate.Enroll:   "metal.enroll metal-enroll enrolling",
		nodestate.Manage:   "metal.manage metal-manage ready failed",
		nodestate.Inspect:  "metal.inspect metal-inspection ready manageable",
		nodestate.Provide:  "metal.provide metal-commissioning manageable",
		nodestate.Deploy:   "metal.deploy  ready",
		nodestate.Undeploy: "metal.undeploy metal-release deployed",
		nodestate.RescueV:  "metal.rescue metal-rescue deployed",
		nodestate.Unrescue: "metal.unrescue metal-unrescue rescue",
		nodestate.Recover:  "metal.recover metal-commissioning failed",
		nodestate.Retire:   "metal.retire metal-retire ready failed enrolling adopting adopted manageable",
		nodestate.Power:    "metal.power metal-power ready manageable deployed rescue failed",
	}
	got := map[nodestate.Verb]string{}
	for _, s := range wf.Verbs() {
		row := s.Workflow + " " + s.Profile
		for _, f := range s.From {
			row += " " + string(f)
		}
		got[s.Verb] = row
		if fn := wf.Workflows()[s.Workflow]; reflect.ValueOf(fn).Pointer() != reflect.ValueOf(s.Func).Pointer() {
			t.Errorf("Workflows()[%s] is not the table's function", s.Workflow)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Verbs() (-want +got):\n%s", diff)
	}
	if _, ok := wf.Workflows()[wf.UpdateBMC]; !ok || len(wf.Workflows()) != len(want)+1 {
		t.Errorf("Workflows() = %d workflows, want every verb's and %s", len(wf.Workflows()), wf.UpdateBMC)
	}
}

func TestCheckVerb(t *testing.T) {
	cases := []struct {
		v    nodestate.Verb
		s    nodestate.State
		want string // "" allowed, else in the INVALID_STATE message
	}{
		{nodestate.Retire, nodestate.Adopted, ""},
		{nodestate.Retire, nodestate.Deployed, "retire needs a node in state ready or failed or enrolling or adopting or adopted or manageable; " +
			"this node is deployed: undeploy it first"},
		{nodestate.Deploy, nodestate.Ready, ""},
		{nodestate.Deploy, nodestate.Deployed, "deploy needs a node in state ready; this node is deployed: undeploy it first"},
		{nodestate.Deploy, nodestate.Manageable, "deploy needs a node in state ready; this node is manageable: provide it first"},
		{nodestate.Undeploy, nodestate.Rescue, "undeploy needs a node in state deployed; this node is rescue: unrescue it first"},
		// No one verb leads from a failed node to ready (recover may end manageable): no hint.
		{nodestate.Deploy, nodestate.Failed, "deploy needs a node in state ready; this node is failed\x00"},
	}
	for _, tc := range cases {
		err := wf.CheckVerb(tc.v, tc.s)
		msg := ""
		if err != nil {
			msg = err.Error() + "\x00" // the end of the message, for a case that wants nothing after it
		}
		if tc.want == "" && err != nil || tc.want != "" && (!errs.Is(err, errs.InvalidState) || !strings.Contains(msg, tc.want)) {
			t.Errorf("CheckVerb(%s, %s) = %v, want %q", tc.v, tc.s, err, tc.want)
		}
	}
}
