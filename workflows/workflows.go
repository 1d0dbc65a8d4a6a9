// Package workflows holds the metal verbs as Temporal workflows: each reads
// like the runbook of its verb, moves the node along the state table
// (nodestate) through control-plane activities, and sends commands to the
// node's site (BMC, boot, cache) and ramdisk (inventory, wipe, image, kexec)
// as activities on the site's task queue. Workflow code is deterministic:
// everything that touches the world is an activity.
package workflows

import (
	"time"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
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

// Verbs maps each verb to its workflow, the built-in profile it runs (""
// for deploy: the user's), and the state it works in.
var Verbs = map[nodestate.Verb]struct {
	Workflow, Profile string
}{
	nodestate.Enroll:   {Enroll, ProfileEnroll},
	nodestate.Manage:   {Manage, ProfileManage},
	nodestate.Inspect:  {Inspect, ProfileInspection},
	nodestate.Provide:  {Provide, ProfileCommissioning},
	nodestate.Deploy:   {Deploy, ""},
	nodestate.Undeploy: {Undeploy, ProfileRelease},
	nodestate.RescueV:  {Rescue, ProfileRescue},
	nodestate.Unrescue: {Unrescue, ProfileUnrescue},
	nodestate.Recover:  {Recover, ProfileCommissioning},
	nodestate.Retire:   {Retire, ProfileRetire},
	nodestate.Power:    {Power, ProfilePower},
}

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
}

// Result is what a verb returns.
type Result struct {
	State nodestate.State `json:"state"`
	// Attestations verified by this workflow before ready: kept in history.
	Attestation *WipeAttestation `json:"attestation,omitempty"`
}

// Control-plane activity names (task queue control-plane).
const (
	ActGetNode          = "node.get"
	ActTransition       = "node.transition"
	ActRecordFacts      = "node.recordFacts"
	ActRecordDeployment = "node.recordDeployment"
	ActIssueDiscovery   = "join.issueDiscoveryToken"
	ActVerifyWipe       = "wipe.verify"
	ActGetImage         = "image.get"
	ActGetProfile       = "profile.get"
	ActRevokeIdentity   = "node.revokeIdentity"
	ActStartCommand     = "command.start"  // local activity
	ActFinishCommand    = "command.finish" // local activity
)

// NodeInfo is what the workflows need to know of a node.
type NodeInfo struct {
	TenantID, NodeID, SiteID, PoolID string
	State                            nodestate.State
	BMC                              kinds.BMCTarget
	MACs                             []string
	Disks                            []string
	Agent                            string // bcd or none
	AllowUnverifiedRelease           bool
	// For a node without MACs, found by PXE discovery (ensureRamdisk).
	ProductUUID              string
	TrustProvisioningNetwork bool
}

// TransitionInput moves a node, compare-and-set.
type TransitionInput struct {
	TenantID, NodeID string
	From, To         nodestate.State
	Error            string
	Maintenance      bool
	// The run making the move: a move into ready consumes the wipe that
	// wipe.verify recorded for this run, or records Exception (a pool
	// policy's: allowUnverifiedRelease, agentNone) in its place.
	WorkflowID, RunID string
	Exception         string
}

// Exceptions to the attested wipe before ready, each allowed by a pool's policy.
const (
	ExceptionUnverifiedRelease = "allowUnverifiedRelease" // policy.allowUnverifiedRelease
	ExceptionAgentNone         = "agentNone"              // agent: none: no ramdisk can wipe
)

// FactsInput records what inspection learned.
type FactsInput struct {
	TenantID, NodeID string
	MACs             []string
	ProductUUID      string
	Inventory        []byte
	Disks            []string
}

// DeploymentInput records the profile a node was deployed with.
type DeploymentInput struct {
	TenantID, NodeID, ProfileID, Role string
	ProfileVersion                    int
}

// DiscoveryInput asks for a fresh single-use discovery token for one boot.
type DiscoveryInput struct {
	TenantID, SiteID, NodeID, WorkflowID string
}

// VerifyWipeInput is the signed disk.wipe result to check against the
// node's inventory.
type VerifyWipeInput struct {
	TenantID, NodeID, WorkflowID, RunID, Nonce string
	// Modes the disks may have been wiped in (none given: any).
	Modes  []string
	Result kinds.Result
}

// WipeAttestation is what wipe.verify proved.
type WipeAttestation struct {
	Mode     string    `json:"mode"`
	Disks    []string  `json:"disks"`
	Bytes    int64     `json:"bytesVerified"`
	Signer   string    `json:"signer"` // the certificate's identity and serial
	Verified time.Time `json:"verified"`
}

// ImageInput names a catalog image.
type ImageInput struct{ TenantID, ImageID string }

// ProfileInput names a profile version.
type ProfileInput struct {
	TenantID, ProfileID string
	Version             int
}

// Profile is a deploy profile as the workflow runs it.
type Profile struct {
	ID      string
	Version int
	Role    string
	Steps   []ProfileStep
	// Plan is Steps resolved against the control plane's step registry;
	// nil in the histories of runs from before it (legacyPlan).
	Plan *sdk.Plan `json:",omitempty"`
}

// ProfileStep is one step of a profile.
type ProfileStep struct {
	Use  string
	With map[string]any
}

// CommandRecord is what command.start and command.finish record.
type CommandRecord struct {
	TenantID, NodeID, SiteID string
	Kind, RunsOn             string
	WorkflowID, RunID, Step  string
	Status, ErrorKind, Error string
	Attempt                  int
}
