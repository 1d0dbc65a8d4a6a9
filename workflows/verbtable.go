package workflows

import (
	"slices"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/nodestate"
)

// VerbSpec is one metal verb: the workflow that runs it (its type name and
// function), the built-in profile it records as the ProfileId search
// attribute ("" for deploy: the user's), and the states it may start from.
type VerbSpec struct {
	Verb     nodestate.Verb
	Workflow string
	Func     any
	Profile  string
	From     []nodestate.State
}

// Verbs is the one verb table the API, the workers and the workflows read.
// Abort is not in it: it acts on a running workflow, whatever the state.
// (A function, not a variable: the workflows check their verb against it.)
func Verbs() []VerbSpec {
	const (
		ready, failed, manageable = nodestate.Ready, nodestate.Failed, nodestate.Manageable
		deployed, rescue          = nodestate.Deployed, nodestate.Rescue
	)
	return []VerbSpec{
		// enroll runs once, on the node enrollment just created.
		{nodestate.Enroll, Enroll, EnrollWorkflow, ProfileEnroll, []nodestate.State{nodestate.Enrolling}},
		{nodestate.Manage, Manage, ManageWorkflow, ProfileManage, []nodestate.State{ready, failed}},
		{nodestate.Inspect, Inspect, InspectWorkflow, ProfileInspection, []nodestate.State{ready, manageable}},
		{nodestate.Provide, Provide, ProvideWorkflow, ProfileCommissioning, []nodestate.State{manageable}},
		{nodestate.Deploy, Deploy, DeployWorkflow, "", []nodestate.State{ready}},
		{nodestate.Undeploy, Undeploy, UndeployWorkflow, ProfileRelease, []nodestate.State{deployed}},
		{nodestate.RescueV, Rescue, RescueWorkflow, ProfileRescue, []nodestate.State{deployed}},
		{nodestate.Unrescue, Unrescue, UnrescueWorkflow, ProfileUnrescue, []nodestate.State{rescue}},
		{nodestate.Recover, Recover, RecoverWorkflow, ProfileCommissioning, []nodestate.State{failed}},
		{nodestate.Retire, Retire, RetireWorkflow, ProfileRetire, []nodestate.State{ready, failed, nodestate.Enrolling,
			nodestate.Adopting, nodestate.Adopted, manageable}},
		{nodestate.Power, Power, PowerWorkflow, ProfilePower, []nodestate.State{ready, manageable, deployed, rescue, failed}},
	}
}

// VerbOf returns verb v's row.
func VerbOf(v nodestate.Verb) (VerbSpec, bool) {
	for _, s := range Verbs() {
		if s.Verb == v {
			return s, true
		}
	}
	return VerbSpec{}, false
}

// CheckVerb returns INVALID_STATE, naming the states that allow it, unless
// verb v may start on a node in state s.
func CheckVerb(v nodestate.Verb, s nodestate.State) error {
	spec, _ := VerbOf(v)
	names := make([]string, len(spec.From))
	for i, a := range spec.From {
		if a == s {
			return nil
		}
		names[i] = string(a)
	}
	hint := ""
	if first, ok := leadsOut[s]; ok && slices.Contains(spec.From, first.to) {
		hint = ": " + string(first.verb) + " it first"
	}
	return errs.New(errs.InvalidState, "%s needs a node in state %s; this node is %s%s", v, strings.Join(names, " or "), s, hint)
}

// leadsOut is, for a resting state, the one verb that takes a node out of
// it and the state that verb ends in, when it always ends there: CheckVerb
// says it when that state is one the refused verb starts from.
var leadsOut = map[nodestate.State]struct {
	verb nodestate.Verb
	to   nodestate.State
}{
	nodestate.Deployed:   {nodestate.Undeploy, nodestate.Ready},
	nodestate.Manageable: {nodestate.Provide, nodestate.Ready},
	nodestate.Rescue:     {nodestate.Unrescue, nodestate.Deployed},
}

// Workflows maps every workflow the control plane runs, by type name, to
// its function: each verb's, and metal.update's.
func Workflows() map[string]any {
	out := map[string]any{UpdateBMC: UpdateBMCWorkflow} // not a verb: checks and saves a node's BMC settings
	for _, s := range Verbs() {
		out[s.Workflow] = s.Func
	}
	return out
}
