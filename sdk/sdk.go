// Package sdk is better-compute's plugin SDK: what a plugin author imports to
// add steps and profiles without touching our packages. A Step has an id,
// where it runs, what it relays and sends, a timeout, whether it is safe to
// run again, a typed input Manifest and a Run function; a Plugin bundles
// steps and profiles. The built-in steps (deploy.image, power.setPower,
// media.insert, wait.agentJoined…) are declared with the same types.
//
// A Registry holds the steps a worker serves. Every profile is resolved
// against it before it is stored and again before a workflow starts
// (Registry.Resolve): unknown steps, inputs of the wrong type or out of
// bounds, a fromStep to a later step or to an output the step does not
// have, and needs the node cannot meet are problems naming the field
// (steps[2].with.port), so nothing moves until the profile can run.
//
// Each step's Run becomes a Temporal activity named by the step id on the
// task queue of where it runs: the control plane's ("control-plane"), the
// node's site ("site/<site id>"), or relayed by the site to the machine's
// ramdisk. A Run may return NotReady(d) to be called again after d, until
// the step's timeout.
//
// What each activity gets (the wire contract, JSON):
//   - a control-plane step: a Call (node, step id in the run, workflow and
//     run ids, its with values, the outputs of the run's earlier steps);
//     it returns its outputs, Values;
//   - a site step: its with values plus the node's BMC target under "bmc"
//     (address, driver, credentialsRef, tls); it returns its outputs as a
//     JSON object, or nothing;
//   - a ramdisk step: its with values, relayed as the command's payload;
//     the signed result's payload is its outputs.
//
// In every case the with values are the profile's after defaults, with the
// fields marked FromStep filled from the outputs of the step fromStep
// names, and the step's input of type Image replaced by the image pinned
// at the node's site: imageId, path (on the site agent's HTTP server),
// digest, compression and size.
package sdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/provision"
)

// RunsOn says where a step's Run runs.
type RunsOn string

const (
	ControlPlane RunsOn = "control-plane" // the control plane's worker: SQL, PKI, rendering
	Site         RunsOn = "site"          // the node's site agent (bcd site): BMCs, boot, cache
	Ramdisk      RunsOn = "ramdisk"       // relayed by the site agent to the machine's ramdisk
)

// Need is something a step needs of the node, checked before a workflow
// starts so that a profile that cannot run on a node is refused while the
// node still has its state.
type Need string

const (
	// NeedsRamdisk: the machine boots our ramdisk first (not on a pool with
	// agent: none).
	NeedsRamdisk Need = "ramdisk"
	// NeedsVirtualMedia: the node's BMC driver has virtual media (Redfish,
	// not IPMI).
	NeedsVirtualMedia Need = "virtualMedia"
)

// Values are a step's inputs (its with, after defaults) or outputs, as
// JSON would decode them: strings, float64 or int64 numbers, bools, lists
// and objects.
type Values map[string]any

// Step is one step a profile may use.
type Step struct {
	// ID is the step id profiles name in use: dotted lowerCamel words such
	// as autoinstall.renderIso.
	ID     string
	RunsOn RunsOn
	// Relays names where Run relays its commands through (the spec's
	// relays: ['site']): a control-plane step never talks to a machine
	// directly.
	Relays []string
	// Sends are the command kinds Run sends (such as site.httpProxy): the
	// workflow's batch scope includes them (the spec's sends).
	Sends []string
	// Timeout bounds the step, NotReady retries included.
	Timeout time.Duration
	// RetrySafe says the step may run again on a machine it already ran on
	// (workflows retry --from-step refuses an unsafe one without --force).
	RetrySafe bool
	// Input is what the step's with may hold.
	Input Manifest
	// Outputs names the fields Run returns, which a later step may read
	// with fromStep.
	Outputs []string
	// Needs are what the node must offer (NeedsRamdisk, NeedsVirtualMedia);
	// a step that runs on the ramdisk needs it without saying so.
	Needs []Need
	// After names steps that must come earlier in the profile (boot.kexec
	// after deploy.image).
	After []string
	// Doc says in a line what the step does, for render and the docs.
	Doc string
	// Lifecycle marks one of the lifecycle's own commands (disk.wipe,
	// inventory.refresh, boot.setEntry…): registered like any step, so
	// every worker serves it from its registry, but sent only by the
	// lifecycle's workflows with inputs they make (a wipe's nonce, a boot's
	// discovery token), so a profile may not use it.
	Lifecycle bool
	// Run does the work. It gets the step's inputs after defaults (and
	// fromStep's fields) and returns its outputs; nil for steps whose work
	// the lifecycle itself does (deploy.image's boot of the ramdisk).
	Run func(ctx context.Context, c *Context, in Values) (Values, error)
}

// Plugin is what a plugin author hands a worker: steps and the profiles
// that use them.
type Plugin struct {
	ID       string
	Steps    []Step
	Profiles []provision.Profile
}

// Node is what a step learns of the node it runs for.
type Node struct {
	ID          string   `json:"id"`
	TenantID    string   `json:"tenantId"`
	SiteID      string   `json:"siteId"`
	PoolID      string   `json:"poolId"`
	MACs        []string `json:"macs,omitempty"`
	ProductUUID string   `json:"productUuid,omitempty"`
	BMCDriver   string   `json:"bmcDriver,omitempty"`
}

// Call is a control-plane step's activity input: what the workflow knows
// when it runs the step. Its Run gets With as its input and the rest in
// its Context.
type Call struct {
	Node       Node              `json:"node"`
	Step       string            `json:"step"` // the step's id in the run, such as 03.acme.renderIso
	Use        string            `json:"use"`  // the step id, such as acme.renderIso
	WorkflowID string            `json:"workflowId"`
	RunID      string            `json:"runId"`
	With       Values            `json:"with,omitempty"`
	From       map[string]Values `json:"from,omitempty"`
}

// Context is what a step's Run gets besides its inputs.
type Context struct {
	Node Node
	// Step is this step's id in the run (such as 03.autoinstall.renderIso),
	// WorkflowID and RunID the run's.
	Step, WorkflowID, RunID string
	// From holds the outputs of the run's earlier steps, by step id (use).
	From map[string]Values
	// SQL, PKI and Artifacts are set on the control plane only.
	SQL       SQL
	PKI       PKI
	Artifacts Artifacts
}

// SQL is the control plane's PostgreSQL.
type SQL interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	// Transaction runs fn in one transaction, committed when fn returns nil.
	Transaction(ctx context.Context, fn func(pgx.Tx) error) error
}

// Join token roles a step may issue.
const RoleProvisioned = "provisioned" // admits an installed machine's bcd node (role node)

// JoinTokenRequest asks for a join token for the step's node.
type JoinTokenRequest struct {
	Role    string        // RoleProvisioned
	TTL     time.Duration // bounded by the control plane (at most 24 h)
	MaxUses int           // 1: single use
}

// Secret is a value that prints redacted; string(s) is the secret.
type Secret string

func (Secret) String() string   { return "(redacted)" }
func (Secret) GoString() string { return "(redacted)" }

// JoinToken is an issued token, to put only where it is consumed (never
// into an output, a log or a command).
type JoinToken struct {
	Token     Secret
	ExpiresAt time.Time
}

// PKI issues join tokens inside the caller's transaction, so the token
// exists only if the step's other writes commit.
type PKI interface {
	IssueJoinToken(ctx context.Context, tx pgx.Tx, node Node, req JoinTokenRequest) (JoinToken, error)
}

// Artifacts publishes per-node files behind the node's site cache.
type Artifacts interface {
	// Publish stores data (in tx) and returns the unguessable URL the
	// node's site serves it at until ttl passes.
	Publish(ctx context.Context, tx pgx.Tx, node Node, name string, data []byte, ttl time.Duration) (url string, err error)
}

// notReady is NotReady's error.
type notReady struct{ after time.Duration }

func (n notReady) Error() string { return fmt.Sprintf("not ready: try again in %s", n.after) }

// NotReady says the step cannot finish yet and should run again after d
// (the spec's stepNotReady), until its timeout.
func NotReady(d time.Duration) error { return notReady{after: d} }

// IsNotReady reports whether err is NotReady's, and after how long.
func IsNotReady(err error) (time.Duration, bool) {
	var n notReady
	if errors.As(err, &n) {
		return n.after, true
	}
	return 0, false
}
