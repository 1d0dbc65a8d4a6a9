// Package nodestate is the node state machine as data: the states a machine
// goes through, the one table of allowed transitions, and which verb may
// start from which state. Workflows move nodes only along this table, and the
// store moves them with compare-and-set on the state they expect.
package nodestate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// State is a node's lifecycle state.
type State string

const (
	Enrolling  State = "enrolling"  // enrolled; the BMC is being checked
	Inspecting State = "inspecting" // inventory is being read
	Cleaning   State = "cleaning"   // disks are being wiped, the wipe attested
	Ready      State = "ready"      // wiped and attested, may be deployed
	Manageable State = "manageable" // held by an operator: not deployable until provided
	Deploying  State = "deploying"  // an OS is being written
	Deployed   State = "deployed"   // runs its OS
	Releasing  State = "releasing"  // undeploy: powered down, wiped, attested
	Rescuing   State = "rescuing"   // a deployed machine is booting the ramdisk as rescue
	Rescue     State = "rescue"     // runs the ramdisk as a rescue environment
	Unrescuing State = "unrescuing" // back from rescue to its OS
	Retiring   State = "retiring"   // crypto-erased, powered off, identity revoked
	Retired    State = "retired"    // final
	Failed     State = "failed"     // an operation failed; failedFrom says which
	Adopting   State = "adopting"   // an installed machine is being adopted
	Adopted    State = "adopted"    // adopted without a metal record of its own
)

// States lists every state.
func States() []State {
	return []State{Enrolling, Inspecting, Cleaning, Ready, Manageable, Deploying, Deployed, Releasing,
		Rescuing, Rescue, Unrescuing, Retiring, Retired, Failed, Adopting, Adopted}
}

// transitions is the one table of allowed moves. A move to Failed is allowed
// from every active state (see Active) and is added by CanTransition.
var transitions = map[State][]State{
	Enrolling:  {Inspecting, Retiring},
	Inspecting: {Cleaning, Ready, Manageable},
	Cleaning:   {Ready},
	Ready:      {Deploying, Inspecting, Manageable, Retiring},
	Manageable: {Inspecting, Cleaning, Retiring},
	Deploying:  {Deployed},
	Deployed:   {Releasing, Rescuing},
	Releasing:  {Cleaning, Ready},
	Rescuing:   {Rescue},
	Rescue:     {Unrescuing},
	Unrescuing: {Deployed},
	Retiring:   {Retired},
	Retired:    {},
	Failed:     {Cleaning, Manageable, Retiring},
	Adopting:   {Adopted, Retiring},
	Adopted:    {Retiring},
}

// Active reports whether s is a state a workflow is working in; such a state
// may fail.
func (s State) Active() bool {
	switch s {
	case Enrolling, Inspecting, Cleaning, Deploying, Releasing, Rescuing, Unrescuing, Retiring, Adopting:
		return true
	}
	return false
}

// KeepsRefusal reports whether a node in s shows, as its last error, why
// the last verb on it failed without moving it: a resting state but failed
// (whose error is the failure's) and retired (whose error says what the
// retire skipped).
func (s State) KeepsRefusal() bool {
	return !s.Active() && s != Failed && s != Retired
}

// CanTransition reports whether a node may move from one state to another.
func CanTransition(from, to State) bool {
	if to == Failed {
		return from.Active()
	}
	return slices.Contains(transitions[from], to)
}

// Check returns INVALID_STATE unless the move is allowed.
func Check(from, to State) error {
	if CanTransition(from, to) {
		return nil
	}
	return errs.New(errs.InvalidState, "a node in state %s cannot move to %s", from, to)
}

// Verb is an operation an operator starts on a node. The verb table (its
// workflow, profile and the states it may start from) is workflows.Verbs.
type Verb string

const (
	Enroll   Verb = "enroll"
	Manage   Verb = "manage"
	Inspect  Verb = "inspect"
	Provide  Verb = "provide"
	Deploy   Verb = "deploy"
	Undeploy Verb = "undeploy"
	RescueV  Verb = "rescue"
	Unrescue Verb = "unrescue"
	Recover  Verb = "recover"
	Retire   Verb = "retire"
	Abort    Verb = "abort"
	Power    Verb = "power"
)

// Parse returns the state named s.
func Parse(s string) (State, error) {
	if slices.Contains(States(), State(s)) {
		return State(s), nil
	}
	return "", fmt.Errorf("unknown node state %q", s)
}

// Diagram renders the table as Graphviz dot, for the docs.
func Diagram() string {
	var b strings.Builder
	b.WriteString("digraph nodestate {\n")
	for _, from := range States() {
		for _, to := range transitions[from] {
			fmt.Fprintf(&b, "  %q -> %q;\n", from, to)
		}
		if from.Active() {
			fmt.Fprintf(&b, "  %q -> %q [style=dashed];\n", from, Failed)
		}
	}
	b.WriteString("}\n")
	return b.String()
}
