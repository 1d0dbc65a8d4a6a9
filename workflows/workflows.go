// Package workflows holds the metal verbs as Temporal workflows: each reads
// like the runbook of its verb, moves the node along the state table
// (nodestate) through control-plane activities, and sends commands to the
// node's site (BMC, boot, cache) and ramdisk (inventory, wipe, image, kexec)
// as activities on the site's task queue. Workflow code is deterministic:
// everything that touches the world is an activity.
package workflows

import (
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
)

// Workflow type names, one per verb.
const (
	Enroll   = "metal.enroll"
	Manage   = "metal.manage"
	Inspect  = "metal.inspect"
	Provide  = "metal.provide"
	Deploy   = "metal.deploy"
	Undeploy = "metal.undeploy"
	Rescue   = "metal.rescue"
	Unrescue = "metal.unrescue"
	Recover  = "metal.recover"
	Retire   = "metal.retire"
	Power    = "metal.power"
)

// Built-in profile ids, recorded as the ProfileId search attribute so
// `workflows list --node N --query "items[].profileId"` tells a machine's life.
const (
	ProfileEnroll        = "metal-enroll"
	ProfileInspection    = "metal-inspection"
	ProfileCommissioning = "metal-commissioning"
	ProfileRelease       = "metal-release"
	ProfileRetire        = "metal-retire"
	ProfileRescue        = "metal-rescue"
	ProfileUnrescue      = "metal-unrescue"
	ProfileManage        = "metal-manage"
	ProfilePower         = "metal-power"
)

// WorkflowID is the id of every lifecycle workflow of a node: one operation
// per node at a time, because Temporal runs one open workflow per id.
func WorkflowID(nodeID string) string { return "metal/" + nodeID }

// Input is every verb's input; each verb reads the fields it takes.
type Input struct {
	TenantID       string `json:"tenantId"`
	NodeID         string `json:"nodeId"`
	ProfileID      string `json:"profileId,omitempty"`
	ProfileVersion int    `json:"profileVersion,omitempty"`
	Wipe           string `json:"wipe,omitempty"`   // undeploy
	Action         string `json:"action,omitempty"` // power
	// ProfileTenant owns the profile the deploy checked; profile.get reads
	// that one. "" in runs started before it.
	ProfileTenant string `json:"profileTenant,omitempty"`
}

// Result is what a verb returns.
type Result struct {
	State nodestate.State `json:"state"`
	// Attestations verified by this workflow before ready: kept in history.
	Attestation *kinds.WipeAttestation `json:"attestation,omitempty"`
}

// UpdateBMCInput is metal.update's input, declared with the activity that
// saves it (kinds).
type UpdateBMCInput = kinds.UpdateBMCInput

// ActVerifyWipe is the activity name the demo tests count in a run's
// history; kinds declares it with the rest of the control plane's contract.
const ActVerifyWipe = kinds.ActVerifyWipe
