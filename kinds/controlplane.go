package kinds

import (
	"strings"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/sdk"
)

// The control plane's own activities (task queue control-plane), which the
// metal verbs' workflows call and activities/controlplane serves: their
// names, inputs and outputs.

// NodeRef names a node: node.get's input.
type NodeRef struct {
	TenantID string `json:"tenantId"`
	NodeID   string `json:"nodeId"`
}

// Control-plane activity names (task queue control-plane).
const (
	ActGetNode          = "node.get"
	ActTransition       = "node.transition"
	ActRecordFacts      = "node.recordFacts"
	ActRecordDeployment = "node.recordDeployment"
	ActRecordRefusal    = "node.recordRefusal"
	ActIssueDiscovery   = "join.issueDiscoveryToken"
	ActVerifyWipe       = "wipe.verify"
	ActGetImage         = "image.get"
	ActGetProfile       = "profile.get"
	ActRevokeIdentity   = "node.revokeIdentity"
	ActStartCommand     = "command.start"  // local activity (runs from before command-log-behind)
	ActFinishCommand    = "command.finish" // local activity (runs from before command-log-behind)
	ActQueueCommand     = "command.queue"  // local activity: hands records to the command log's writer
	ActFlushCommands    = "command.flush"  // local activity: the run's records, committed before it goes on
)

// NodeInfo is what the workflows need to know of a node.
type NodeInfo struct {
	TenantID, NodeID, SiteID, PoolID string
	State                            nodestate.State
	BMC                              BMCTarget
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

// RefusalInput is the error of a verb that failed before it moved the
// node, which stays in State.
type RefusalInput struct {
	TenantID, NodeID string
	State            nodestate.State
	Error            string
}

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
	Result Result
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
type ImageInput struct {
	TenantID, ImageID string
	// Owner is the tenant of the profile that names the image (another
	// tenant's public profile): the image is read from its catalog.
	Owner string `json:",omitempty"`
}

// ProfileInput names a profile version.
type ProfileInput struct {
	TenantID, ProfileID string
	Version             int
	// Owner is the tenant of the profile the deploy checked (another
	// tenant's public one, or TenantID): profile.get reads that one only.
	// "" in the histories of runs from before: the profile TenantID reads.
	Owner string `json:",omitempty"`
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
	// Owner is the profile's tenant (a public profile's is another
	// tenant's); "" in the histories of runs from before.
	Owner string `json:",omitempty"`
}

// ProfileStep is one step of a profile.
type ProfileStep struct {
	Use  string
	With map[string]any
}

// CommandRecord is one command of the command log, as the workflow that
// sends it knows it: sent (Status empty) or ended.
type CommandRecord struct {
	TenantID, NodeID, SiteID string
	Kind, RunsOn             string
	WorkflowID, RunID, Step  string
	Status, ErrorKind, Error string
	Attempt                  int
	// StartedAt and FinishedAt are the workflow's clock when it sent the
	// command and saw it end (command.queue and command.flush record them;
	// command.start and command.finish record the database's).
	StartedAt  time.Time `json:",omitzero"`
	FinishedAt time.Time `json:",omitzero"`
	// Previous, on a command.start, is the outcome of the run's command
	// before it, which command.start records first, in the same
	// transaction: a verb's commands mostly come back to back, and one
	// local activity and one commit cost less than two.
	Previous *CommandRecord `json:",omitempty"`
}

// CommandQueue is what command.queue hands to the command log's writer,
// which commits it behind the workflow: the outcome of the run's last
// command, the start of its next, or both (in that order). command.queue
// returns the run it was handed in, which a workflow reset to an earlier
// step replays: commands queued in an earlier run are that run's records.
type CommandQueue struct {
	Outcome *CommandRecord `json:",omitempty"`
	Start   *CommandRecord `json:",omitempty"`
}

// CommandFlush is what command.flush commits before the run moves its node
// or ends: every command the run queued since its last flush, as it ended
// (whatever the writer lost to a crash is written again), and the outcome
// not queued yet.
type CommandFlush struct {
	Commands []CommandRecord
	Outcome  *CommandRecord `json:",omitempty"`
}

// Control-plane activities of PXE discovery.
const (
	ActBeginMACWait      = "discovery.beginWait"         // returns when the wait began (database clock)
	ActFindCandidate     = "discovery.findCandidate"     // polls, heartbeating, until a candidate or the deadline
	ActAwaitConfirmation = "discovery.awaitConfirmation" // the node now waits for an operator
	ActTakeCandidate     = "discovery.takeCandidate"     // binds the candidate at once (trusted network)
	ActEndMACWait        = "discovery.endWait"           // the workflow stops waiting (failed or aborted)
	ActForgetMAC         = "discovery.forgetMAC"         // unbinds a discovered MAC the ramdisk disowned
)

// MACWaitInput names the node, the UUID it is looked for under, and the
// window; MAC is the candidate, where one is given.
type MACWaitInput struct {
	TenantID, NodeID, SiteID string
	ProductUUID              string
	Since, Deadline          time.Time
	MAC                      string
}

// Candidate is what discovery.findCandidate found: Found false when the
// deadline passed first.
type Candidate struct {
	Found      bool
	MAC        string
	ClientUUID string
	Arch       string
	FirstSeen  time.Time
}

// ActUpdateBMC saves a node's checked BMC settings (control plane).
const ActUpdateBMC = "node.updateBMC"

// UpdateBMCInput is metal.update's: the node, the state it must still be
// in when the settings are saved, and its BMC as it will be.
type UpdateBMCInput struct {
	TenantID, NodeID, SiteID string
	State                    nodestate.State
	ProductUUID              string // the node's, "" when unknown: the BMC must report the same machine
	BMC                      BMCTarget
}

// UUIDForms returns the forms a product UUID takes on the wire, lowercase:
// as written, and in SMBIOS byte order (bmc.SwapUUID: firmwares disagree on
// the byte order of DHCP option 97 and SMBIOS). A string that is not a
// UUID comes back alone.
func UUIDForms(u string) []string {
	u = strings.ToLower(u)
	swapped, err := bmc.SwapUUID(u)
	if err != nil {
		return []string{u}
	}
	return []string{u, swapped}
}
