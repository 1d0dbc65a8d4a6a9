// Package kinds is the contract between the control plane's workflows and the
// machines' side: the command kinds under the spec's names and the input
// and output of each; where each runs and its timeout are its step's (the
// steps package registers every kind as a built-in step). Workflows send them as Temporal
// activities named by the kind on the site's task queue; the site agent runs
// the BMC and boot kinds itself and relays the ramdisk kinds to the machine's
// connected ramdisk. The control plane's own activities (node.get,
// node.transition, wipe.verify…), which the workflows call on the
// control-plane queue, have their names and types here too
// (controlplane.go), so their implementations do not import the workflows.
package kinds

import (
	"encoding/json"
	"time"

	"github.com/better-compute/better-compute/bmc"
)

// Kinds run by the site agent itself.
const (
	PowerSetPower           = "power.setPower"
	ManagementSetBootDevice = "management.setBootDevice"
	BMCInspect              = "bmc.inspect"
	MediaInsert             = "media.insert" // mount an ISO on the BMC's virtual media, boot it once
	MediaEject              = "media.eject"
	BootSetEntry            = "boot.setEntry"   // serve a machine the ramdisk (or tell it to boot locally)
	BootClearEntry          = "boot.clearEntry" // forget a machine's boot entry
	CacheEnsureImage        = "cache.ensureImage"
)

// TalksToBMC reports whether kind, a site kind, is one conversation with
// the machine's BMC, through the site agent's BMC gate (which heartbeats it).
func TalksToBMC(kind string) bool {
	switch kind {
	case PowerSetPower, ManagementSetBootDevice, BMCInspect, MediaInsert, MediaEject:
		return true
	}
	return false
}

// Kinds run by the ramdisk, relayed by the site agent.
const (
	InventoryRefresh = "inventory.refresh"
	DiskWipe         = "disk.wipe"
	DeployImage      = "deploy.image"
	BootKexec        = "boot.kexec"
	LogsCollect      = "logs.collect"
	DiagNVML         = "diag.nvml"
)

// Pool agents: AgentBCD pools boot our ramdisk and run bcd; AgentNone pools
// hold appliance OSes (Talos) that never run it, so no machine-side kind
// reaches them.
const (
	AgentBCD  = "bcd"
	AgentNone = "none"
)

// Statuses of a command in the command log.
const (
	CommandSent      = "sent"
	CommandSucceeded = "succeeded"
	CommandFailed    = "failed"
	CommandAborted   = "aborted" // metal.abort cancelled it while it ran
)

// SiteTaskQueue is the task queue a site's agents serve.
func SiteTaskQueue(siteID string) string { return "site/" + siteID }

// EnvSecretPrefix starts every env:// credentials variable the API accepts
// and a site agent resolves without being told (bcd site --allow-env names
// others), so env:// never reads the rest of the agent's environment.
const EnvSecretPrefix = "BCD_SECRET_"

// BMCTarget says which BMC a command drives. Credentials are a reference
// (secret://, env://, vault://) resolved by the site agent where it is used;
// they never travel in clear.
type BMCTarget struct {
	NodeID         string `json:"nodeId"`
	Address        string `json:"address"`
	Driver         string `json:"driver"` // redfish or ipmi
	CredentialsRef string `json:"credentialsRef"`
	// TLS says how the BMC's certificate is checked (enroll --bmc-ca-file,
	// --bmc-tls-pin, --bmc-insecure); public, so it may travel in clear.
	TLS bmc.TLS `json:"tls,omitzero"`
}

// MediaInsertInput is media.insert's input.
type MediaInsertInput struct {
	BMC BMCTarget `json:"bmc"`
	URL string    `json:"url"` // the ISO, which the BMC fetches itself
}

// MediaEjectInput is media.eject's input.
type MediaEjectInput struct {
	BMC BMCTarget `json:"bmc"`
}

// SetPowerInput is power.setPower's input.
type SetPowerInput struct {
	BMC    BMCTarget       `json:"bmc"`
	Action bmc.PowerAction `json:"action"`
}

// SetPowerOutput is power.setPower's result: the state the BMC reported
// and how long the action took until it did (bmc.PowerResult).
type SetPowerOutput struct {
	PowerState  bmc.PowerState `json:"powerState"`
	ConfirmedMs int64          `json:"confirmedMs"` // from the first request to the BMC reporting PowerState
	PowerReads  int            `json:"powerReads"`  // state reads it took
}

// SetBootDeviceInput is management.setBootDevice's input.
type SetBootDeviceInput struct {
	BMC        BMCTarget      `json:"bmc"`
	Device     bmc.BootDevice `json:"device"`
	Persistent bool           `json:"persistent,omitempty"`
}

// InspectInput is bmc.inspect's input.
type InspectInput struct {
	BMC BMCTarget `json:"bmc"`
}

// InspectOutput is bmc.inspect's result.
type InspectOutput struct {
	Inventory bmc.Inventory `json:"inventory"`
}

// BootEntry is what the site serves a machine that PXE-boots.
type BootEntry struct {
	NodeID string   `json:"nodeId"`
	MACs   []string `json:"macs"`
	// Ramdisk: boot the ramdisk with DiscoveryToken on its command line;
	// false: tell it to boot from its local disk.
	Ramdisk bool `json:"ramdisk"`
	// DiscoveryToken is a fresh single-use token for this boot. It is a
	// secret: it reaches Temporal only through the encrypting payload codec.
	DiscoveryToken string `json:"discoveryToken,omitempty"`
}

// ClearEntryInput is boot.clearEntry's input.
type ClearEntryInput struct {
	NodeID string `json:"nodeId"`
}

// EnsureImageInput is cache.ensureImage's input: the catalog entry.
type EnsureImageInput struct {
	ImageID     string `json:"imageId"`
	Source      string `json:"source"`
	Digest      string `json:"digest"`
	Compression string `json:"compression"`
	Size        int64  `json:"size"`
}

// EnsureImageOutput says where the site serves the verified image.
type EnsureImageOutput struct {
	// Path on the site agent's HTTP server, e.g. /cache/sha256/<hex>.
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Ramdisk command payloads.

// WipeInput is disk.wipe's input.
type WipeInput struct {
	Mode string `json:"mode"` // quick, secure-erase, crypto-erase
	// Fallback is the mode for a disk that cannot do Mode ("" for none: such
	// a disk fails the command). Each attestation names the mode it got.
	Fallback string `json:"fallback,omitempty"`
	// WorkflowID and Nonce bind the signed results to this release: the
	// ramdisk copies both into every attestation.
	WorkflowID string `json:"workflowId"`
	Nonce      string `json:"nonce"`
}

// DeployImageInput is deploy.image's input.
type DeployImageInput struct {
	ImageID     string `json:"imageId"`
	Path        string `json:"path"` // on the site agent, from cache.ensureImage
	Digest      string `json:"digest"`
	Compression string `json:"compression"`
	Format      string `json:"format"`
	Size        int64  `json:"size"`
	// Disk names the target disk (WWN or serial); "" means the first disk.
	Disk string `json:"disk,omitempty"`
	// UserDataRef is a reference to the rendered user data, never the data:
	// the path of its NoCloud seed on the site's boot listener
	// (userdata.render), which the ramdisk writes to a cidata partition.
	UserDataRef string `json:"userDataRef,omitempty"`
	// UserDataSHA256 is the seed's digest (hex), checked before it is written.
	UserDataSHA256 string `json:"userDataSha256,omitempty"`
}

// DeployImageOutput is deploy.image's result.
type DeployImageOutput struct {
	Disk         string `json:"disk"`
	BytesWritten int64  `json:"bytesWritten"`
	Digest       string `json:"digest"` // verified while streaming
}

// KexecInput is boot.kexec's input: boot the deployed OS from the ramdisk.
type KexecInput struct {
	Disk string `json:"disk"`
}

// Command is a ramdisk command as relayed: its id is stable across retries
// (workflow id, run id and step) so a ramdisk never runs one twice.
type Command struct {
	ID      string          `json:"id"`
	NodeID  string          `json:"nodeId"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// Result is a ramdisk's answer to a command, signed with the key certified
// for the ramdisk at join, over Payload. The certificate itself (CertPEM)
// comes only with the results the control plane checks the signature of
// (CarriesCertificate); every other result's signer is the ramdisk the
// control plane certified at join, its certificate in the certificates
// table.
type Result struct {
	CommandID string          `json:"commandId"`
	Kind      string          `json:"kind"`
	OK        bool            `json:"ok"`
	ErrorKind string          `json:"errorKind,omitempty"`
	Error     string          `json:"error,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Signature []byte          `json:"signature,omitempty"`
	CertPEM   []byte          `json:"certPem,omitempty"`
	Finished  time.Time       `json:"finished"`
}

// CarriesCertificate reports whether a ramdisk's result of kind carries its
// certificate: a disk.wipe's, whose signed attestations the control plane
// verifies against it (wipe.verify). A result stays in Temporal's history
// and goes through the workflow's task and activity payloads; the
// certificate was more than half of a deploy.image or boot.kexec result.
func CarriesCertificate(kind string) bool { return kind == DiskWipe }

// Progress is what a ramdisk reports while a command runs; the relay
// activity heartbeats with it so a retry resumes.
type Progress struct {
	CommandID string `json:"commandId"`
	Bytes     int64  `json:"bytes"`
	Total     int64  `json:"total,omitempty"`
	Disk      string `json:"disk,omitempty"`
	// Boot is where the ramdisk's boot is while the command waits for it
	// (the site agent's boot trail, e.g. "script, 3s ago").
	Boot string `json:"boot,omitempty"`
	// BMC is the node's BMC while it fails to answer ("BMC H unreachable
	// since T: <its last answer>"), while the command waits on it.
	BMC string `json:"bmc,omitempty"`
	// RamdiskHeard is when the site agent last heard from the node's
	// ramdisk (or started, if it never did) while the command waited with
	// no ramdisk boot in progress; the next attempt carries it on, so a
	// site agent restart does not start its count of silence again.
	RamdiskHeard time.Time `json:"ramdiskHeard,omitzero"`
}
