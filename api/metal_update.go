package api

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.temporal.io/sdk/temporal"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

// updateWait bounds how long metal.update waits for the BMC's answer: the
// check's three tries of bmc.inspect, and the save.
const updateWait = 3 * time.Minute

// Update is metal.update: it changes a node's BMC settings once the BMC
// answered them. The check runs as a workflow under the node's workflow id
// (so no verb runs beside it), through the node's site; the node keeps its
// settings and state when the BMC refuses, does not answer, or is another
// machine's.
func (s metal) Update(ctx context.Context, r *connect.Request[v1.UpdateNodeRequest]) (*connect.Response[v1.GetNodeResponse], error) {
	n, err := s.node(ctx, r.Msg.TenantId, r.Msg.Id)
	if err != nil {
		return nil, err
	}
	target, creds, err := updatedBMC(n, r.Msg.GetBmc())
	if err != nil {
		return nil, err
	}
	if err := s.checkCredentialsRef(ctx, n.TenantID, r.Msg.GetBmc().GetCredentialsRef()); err != nil {
		return nil, err
	}
	site, err := s.store.GetSite(ctx, n.TenantID, n.SiteID)
	if err != nil {
		return nil, err
	}
	if err := checkSiteDriver(site, target.Driver); err != nil {
		return nil, err
	}
	if n.State.Active() || n.State == nodestate.Retired {
		return nil, errs.New(errs.InvalidState, "node %s is %s: change its BMC settings once it rests (wait, or metal abort it), not while a verb runs", n.ID, n.State)
	}
	if n, err = s.idle(ctx, n); err != nil {
		return nil, err
	}
	sealed := ""
	if creds != nil { // sealed before the check: the site reads credentials only by reference
		b, _ := json.Marshal(map[string]string{"username": creds.Username, "password": creds.Password})
		if sealed, err = s.store.CreateSecret(ctx, n.TenantID, b); err != nil {
			return nil, err
		}
		target.CredentialsRef = store.SecretRef(n.TenantID, sealed)
	}
	if target.CredentialsRef != n.BMCCredentialsRef {
		if err := s.store.SetPendingBMCRef(ctx, n.TenantID, n.ID, target.CredentialsRef); err != nil {
			return nil, err
		}
	}
	if err := s.checkAndSave(ctx, n, target); err != nil {
		cctx := context.WithoutCancel(ctx)
		_ = s.store.SetPendingBMCRef(cctx, n.TenantID, n.ID, "")
		if sealed != "" {
			_ = s.store.DeleteUnnamedSecret(cctx, n.TenantID, sealed)
		}
		return nil, err
	}
	if n, err = s.store.GetNode(ctx, n.TenantID, n.ID); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.GetNodeResponse{Node: nodeOut(n)}), nil
}

// updatedBMC is the node's BMC with the request's fields over it, checked
// as enroll checks them; inline credentials come back apart, unsealed.
func updatedBMC(n store.Node, b *v1.Bmc) (kinds.BMCTarget, *v1.BmcCredentials, error) {
	t := kinds.BMCTarget{NodeID: n.ID, Address: n.BMCAddress, Driver: n.BMCDriver, CredentialsRef: n.BMCCredentialsRef, TLS: n.BMCTLS}
	if b == nil || (b.Address == "" && b.Driver == "" && b.Credentials == nil && b.CredentialsRef == "" && b.Tls == nil) {
		return t, nil, errs.Invalid("bmc", "give what to change: the BMC's address, credentials or credentialsRef, or TLS trust")
	}
	if b.Driver != "" {
		t.Driver = b.Driver
	}
	if b.Address != "" || b.Driver != "" {
		raw := b.Address
		if raw == "" {
			raw = n.BMCAddress
		}
		addr, err := bmc.ParseAddress(t.Driver, raw)
		if err != nil {
			return t, nil, err
		}
		t.Address, t.Driver = addr.String(), addr.Driver
	}
	creds := b.GetCredentials()
	switch {
	case creds != nil && b.CredentialsRef != "":
		return t, nil, errs.Invalid("bmc.credentials", "give credentials or credentialsRef, not both")
	case creds != nil && (creds.Username == "" || creds.Password == ""):
		return t, nil, errs.Invalid("bmc.credentials", "give both username and password")
	case b.CredentialsRef != "" && !refPattern.MatchString(b.CredentialsRef):
		return t, nil, errs.Invalid("bmc.credentialsRef", "want a secret://, env:// or vault:// reference")
	case b.CredentialsRef != "":
		var c checks // the rules enroll applies: secret:// of this tenant, env:// with the site's prefix
		if c.credentialsRef(n.TenantID, b.CredentialsRef); c.err != nil {
			return t, nil, c.err
		}
		t.CredentialsRef = b.CredentialsRef
	}
	if b.Tls != nil {
		t.TLS = bmcTLS(b.Tls)
	}
	addr, err := bmc.ParseAddress(t.Driver, t.Address)
	if err != nil {
		return t, nil, err
	}
	if err := t.TLS.Check("bmc.tls", addr); err != nil {
		return t, nil, err
	}
	return t, creds, nil
}

// checkAndSave runs metal.update's workflow and waits for its end.
func (s metal) checkAndSave(ctx context.Context, n store.Node, target kinds.BMCTarget) error {
	in := wf.UpdateBMCInput{TenantID: n.TenantID, NodeID: n.ID, SiteID: n.SiteID, State: n.State,
		ProductUUID: strings.ToLower(n.ProductUUID), BMC: target}
	run, err := s.startNodeWorkflow(ctx, n, nodeRun{verb: "update", workflow: wf.UpdateBMC, timeout: updateWait}, in)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, updateWait+10*time.Second)
	defer cancel()
	if err := run.Get(wctx, nil); err != nil {
		return updateError(n, target, err)
	}
	return nil
}

// updateError is the check's failure as the API answers it: the BMC's
// kind and one clean line, saying the node kept its settings.
func updateError(n store.Node, target kinds.BMCTarget, err error) error {
	kind := errs.FromTemporal(err)
	if kind == "" {
		kind = errs.Unavailable
	}
	var app *temporal.ApplicationError
	msg := err.Error()
	if errors.As(err, &app) {
		msg = app.Message()
	}
	return errs.New(kind, "node %s keeps its BMC settings: the BMC at %s did not accept the new ones: %s", n.ID, target.Address, msg)
}
