// Package controlplane holds the activities that run on the control plane's
// own task queue: moving nodes along the state table in Postgres, recording
// commands, issuing discovery tokens, reading the catalog and profiles, and
// verifying the machine-signed wipe attestations before a node is ready.
package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// DiscoveryTTL bounds how long a discovery token admits a ramdisk.
const DiscoveryTTL = time.Hour

// Activities holds the control plane's dependencies.
type Activities struct {
	Store *store.Store
	CA    *pki.CA // nil until `better-compute pki init`: wipes cannot be verified
	Now   func() time.Time
	// Metrics counts commands finished and wipes verified; nil counts
	// nothing.
	Metrics *metrics.ControlPlane
	// Steps is the registry deploy profiles resolve against and whose
	// control-plane steps this worker runs; nil: the built-in steps.
	Steps *sdk.Registry
	// PKI and Artifacts are what control-plane steps get in their Context;
	// nil: a step that uses them fails UNSUPPORTED.
	PKI       sdk.PKI
	Artifacts sdk.Artifacts

	behind commandWriter // the command log's writer (commandlog.go)
}

// Register registers every activity under its name.
func (a *Activities) Register(r worker.ActivityRegistry) {
	reg := func(name string, f any) { r.RegisterActivityWithOptions(f, activity.RegisterOptions{Name: name}) }
	reg(kinds.ActGetNode, a.GetNode)
	reg(kinds.ActTransition, a.Transition)
	reg(kinds.ActRecordFacts, a.RecordFacts)
	reg(kinds.ActRecordDeployment, a.RecordDeployment)
	reg(kinds.ActRecordRefusal, a.RecordRefusal)
	reg(kinds.ActIssueDiscovery, a.IssueDiscoveryToken)
	reg(kinds.ActVerifyWipe, a.VerifyWipe)
	reg(kinds.ActGetImage, a.GetImage)
	reg(kinds.ActGetProfile, a.GetProfile)
	reg(kinds.ActRevokeIdentity, a.RevokeIdentity)
	reg(kinds.ActStartCommand, a.StartCommand)
	reg(kinds.ActFinishCommand, a.FinishCommand)
	reg(kinds.ActQueueCommand, a.QueueCommand)
	reg(kinds.ActFlushCommands, a.FlushCommands)
	reg(kinds.ActBeginMACWait, a.BeginMACWait)
	reg(kinds.ActFindCandidate, a.FindCandidate)
	reg(kinds.ActAwaitConfirmation, a.AwaitConfirmation)
	reg(kinds.ActTakeCandidate, a.TakeCandidate)
	reg(kinds.ActEndMACWait, a.EndMACWait)
	reg(kinds.ActForgetMAC, a.ForgetMAC)
	reg(kinds.ActUpdateBMC, a.UpdateBMC)
	reg(kinds.ActRenderUserData, a.RenderUserData)
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// GetNode reads what the workflows need of a node and its pool.
func (a *Activities) GetNode(ctx context.Context, in kinds.NodeRef) (kinds.NodeInfo, error) {
	n, p, err := a.Store.GetNodeAndPool(ctx, in.TenantID, in.NodeID)
	if err != nil {
		return kinds.NodeInfo{}, errs.ToTemporal(err)
	}
	return kinds.NodeInfo{TenantID: n.TenantID, NodeID: n.ID, SiteID: n.SiteID, PoolID: n.PoolID, State: n.State,
		BMC:  kinds.BMCTarget{NodeID: n.ID, Address: n.BMCAddress, Driver: n.BMCDriver, CredentialsRef: n.BMCCredentialsRef, TLS: n.BMCTLS},
		MACs: n.MACs, Disks: n.Disks, Agent: p.Agent, AllowUnverifiedRelease: p.Policy.AllowUnverifiedRelease,
		ProductUUID: n.ProductUUID, TrustProvisioningNetwork: p.Policy.TrustProvisioningNetwork}, nil
}

// Transition moves a node, compare-and-set.
func (a *Activities) Transition(ctx context.Context, in kinds.TransitionInput) error {
	return errs.ToTemporal(a.Store.Transition(ctx, in.TenantID, in.NodeID, in.From, in.To,
		store.TransitionInfo{Error: in.Error, Maintenance: in.Maintenance,
			Run: store.Run{WorkflowID: in.WorkflowID, RunID: in.RunID}, Exception: store.WipeKind(in.Exception)}))
}

// RecordFacts stores what inspection learned.
func (a *Activities) RecordFacts(ctx context.Context, in kinds.FactsInput) error {
	return errs.ToTemporal(a.Store.RecordFacts(ctx, in.TenantID, in.NodeID, store.NodeFacts{MACs: in.MACs,
		ProductUUID: in.ProductUUID, Inventory: in.Inventory, Disks: in.Disks}))
}

// RecordDeployment stores the profile the node runs.
func (a *Activities) RecordDeployment(ctx context.Context, in kinds.DeploymentInput) error {
	return errs.ToTemporal(a.Store.RecordDeployment(ctx, in.TenantID, in.NodeID, in.ProfileID, in.ProfileVersion, in.Role))
}

// RecordRefusal shows on a node the error of a verb that left it where it was.
func (a *Activities) RecordRefusal(ctx context.Context, in kinds.RefusalInput) error {
	return errs.ToTemporal(a.Store.RecordRefusal(ctx, in.TenantID, in.NodeID, in.State, in.Error))
}

// IssueDiscoveryToken makes a fresh single-use token for one ramdisk boot.
// Only its hash is stored; the plain token travels to the site inside the
// encrypted payloads.
func (a *Activities) IssueDiscoveryToken(ctx context.Context, in kinds.DiscoveryInput) (string, error) {
	plain, hash := pki.NewToken(pki.TokenDiscovery)
	err := a.Store.CreateJoinToken(ctx, store.JoinToken{ID: ids.New(ids.JoinToken), TenantID: in.TenantID,
		SiteID: in.SiteID, NodeID: in.NodeID, Kind: string(pki.TokenDiscovery), WorkflowID: in.WorkflowID,
		ExpiresAt: a.now().Add(DiscoveryTTL)}, hash)
	return string(plain), errs.ToTemporal(err)
}

// GetImage reads a catalog image as the site cache needs it.
func (a *Activities) GetImage(ctx context.Context, in kinds.ImageInput) (kinds.EnsureImageInput, error) {
	tenant := in.TenantID
	if in.Owner != "" { // a public profile's image is in its owner's catalog
		tenant = in.Owner
	}
	img, err := a.Store.GetImage(ctx, tenant, in.ImageID)
	if err != nil {
		return kinds.EnsureImageInput{}, errs.ToTemporal(err)
	}
	return kinds.EnsureImageInput{ImageID: img.ID, Source: img.Source, Digest: img.Digest,
		Compression: img.Compression, Size: img.Size}, nil
}

// GetProfile reads a deploy profile (in.Owner's, the one the deploy
// checked, when set) and resolves it against the step registry
// (PlanProfile).
func (a *Activities) GetProfile(ctx context.Context, in kinds.ProfileInput) (kinds.Profile, error) {
	var p store.Profile
	var err error
	if in.Owner != "" { // the catalog the deploy checked: the tenant's own or another's public profile
		p, err = a.Store.GetProfileOf(ctx, in.TenantID, in.Owner, in.ProfileID, in.Version)
	} else {
		p, err = a.Store.GetProfile(ctx, in.TenantID, in.ProfileID, in.Version)
	}
	if err != nil {
		return kinds.Profile{}, errs.ToTemporal(err)
	}
	var doc provision.Profile
	if err := json.Unmarshal(p.Document, &doc); err != nil {
		return kinds.Profile{}, fmt.Errorf("profile %s v%d does not decode: %w", p.ID, p.Version, err)
	}
	reg, err := a.registry()
	if err != nil {
		return kinds.Profile{}, err
	}
	out, err := PlanProfile(reg, doc)
	out.Owner = p.TenantID
	return out, errs.ToTemporal(err)
}

// RevokeIdentity revokes a retired node's certificates and join tokens.
func (a *Activities) RevokeIdentity(ctx context.Context, in kinds.DeploymentInput) error {
	_, err := a.Store.RevokeIdentity(ctx, in.TenantID, in.NodeID)
	return errs.ToTemporal(err)
}

// StartCommand records a command sent (a local activity of the workflow),
// after the outcome of the run's command before it when it carries one
// (kinds.CommandRecord.Previous), in the same transaction.
func (a *Activities) StartCommand(ctx context.Context, c kinds.CommandRecord) error {
	var prev *store.CommandOutcome
	if p := c.Previous; p != nil {
		prev = &store.CommandOutcome{WorkflowID: p.WorkflowID, RunID: p.RunID, Step: p.Step,
			Status: p.Status, Attempt: p.Attempt, ErrorKind: p.ErrorKind, Error: p.Error}
	}
	took, err := a.Store.StartCommandAfter(ctx, prev, storeCommand(c))
	if err != nil {
		return errs.ToTemporal(err)
	}
	if prev != nil {
		a.Metrics.CommandFinished(c.Previous.Kind, c.Previous.Status, took)
	}
	return nil
}

// FinishCommand records a command's outcome.
func (a *Activities) FinishCommand(ctx context.Context, c kinds.CommandRecord) error {
	took, err := a.Store.FinishCommand(ctx, c.WorkflowID, c.RunID, c.Step, c.Status, max(c.Attempt, 1), c.ErrorKind, c.Error)
	if err != nil {
		return errs.ToTemporal(err)
	}
	a.Metrics.CommandFinished(c.Kind, c.Status, took)
	return nil
}
