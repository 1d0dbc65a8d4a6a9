package steps

import (
	"fmt"
	"slices"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
)

// Reserved are the activity names better-compute registers itself: the
// control plane's own activities (the kinds package's Act names) and every
// built-in step's id. A plugin step with one of these ids would make the
// control-plane worker panic at registration, or at the site be served by
// our activity instead of the plugin's Run.
func Reserved() []string {
	out := []string{
		kinds.ActGetNode, kinds.ActTransition, kinds.ActRecordFacts, kinds.ActRecordDeployment, kinds.ActRecordRefusal,
		kinds.ActIssueDiscovery, kinds.ActVerifyWipe, kinds.ActGetImage, kinds.ActGetProfile,
		kinds.ActRevokeIdentity, kinds.ActStartCommand, kinds.ActFinishCommand, kinds.ActQueueCommand, kinds.ActFlushCommands,
		kinds.ActBeginMACWait, kinds.ActFindCandidate, kinds.ActAwaitConfirmation, kinds.ActTakeCandidate,
		kinds.ActEndMACWait, kinds.ActForgetMAC, kinds.ActUpdateBMC, kinds.ActRenderUserData,
	}
	for _, s := range Builtins().Steps {
		out = append(out, s.ID)
	}
	return out
}

// checkReserved refuses a plugin step whose id is a reserved name.
func checkReserved(plugins []sdk.Plugin) error {
	reserved := Reserved()
	for _, p := range plugins {
		for _, s := range p.Steps {
			if slices.Contains(reserved, s.ID) {
				return fmt.Errorf("plugin %s: step id %s is reserved: better-compute registers an activity of that name (see steps.Reserved, the kinds package's constants); give the step the plugin's own prefix", p.ID, s.ID)
			}
		}
	}
	return nil
}
