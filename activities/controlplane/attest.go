package controlplane

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/better-compute/better-compute/attest"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// VerifyWipe proves a wipe before a node may be ready: the result was
// signed by a ramdisk certificate of our CA for this very node, not revoked;
// every attestation in it verifies with that certificate's key; and they
// cover every disk of the node's inventory for this workflow and nonce, each
// read back. Anything less is UNVERIFIED_WIPE. What it proved is recorded
// for the workflow run (store.RecordWipe): the store lets that run, and only
// that run, move the node into ready once.
func (a *Activities) VerifyWipe(ctx context.Context, in kinds.VerifyWipeInput) (kinds.WipeAttestation, error) {
	att, err := a.verifyWipe(ctx, in)
	return att, errs.ToTemporal(err)
}

func (a *Activities) verifyWipe(ctx context.Context, in kinds.VerifyWipeInput) (kinds.WipeAttestation, error) {
	unverified := func(format string, args ...any) error {
		return errs.New(errs.UnverifiedWipe, "node %s: %s", in.NodeID, fmt.Sprintf(format, args...))
	}
	if a.CA == nil {
		return kinds.WipeAttestation{}, unverified("the control plane has no CA (run `better-compute pki init`), so no signature can be checked")
	}
	cert, err := pki.ParseCert(in.Result.CertPEM)
	if err != nil {
		return kinds.WipeAttestation{}, unverified("the wipe result carries no valid certificate: %v", err)
	}
	role, identity, err := a.CA.Verify(cert)
	if err != nil {
		return kinds.WipeAttestation{}, unverified("the signing certificate is not ours: %v", err)
	}
	if role != pki.RoleRamdisk || identity != in.NodeID {
		return kinds.WipeAttestation{}, unverified("signed by %s %s, not by this node's ramdisk", role, identity)
	}
	serial := cert.SerialNumber.Text(16)
	if revoked, err := a.Store.CertificateRevoked(ctx, serial); err != nil {
		return kinds.WipeAttestation{}, err
	} else if revoked {
		return kinds.WipeAttestation{}, unverified("the signing certificate %s is revoked or was never issued here", serial)
	}
	pub, ok := pki.PublicKeyOf(cert).(ed25519.PublicKey)
	if !ok {
		return kinds.WipeAttestation{}, unverified("the signing key is not ed25519")
	}
	if err := pki.VerifySignature(pub, in.Result.Payload, in.Result.Signature); err != nil {
		return kinds.WipeAttestation{}, unverified("the result's signature does not verify: %v", err)
	}
	var signed []attest.Signed
	if err := json.Unmarshal(in.Result.Payload, &signed); err != nil {
		return kinds.WipeAttestation{}, unverified("the result is not a list of signed attestations: %v", err)
	}
	var atts []attest.WipeAttestation
	var total int64
	for _, s := range signed {
		x, err := attest.Verify(pub, s)
		if err != nil {
			return kinds.WipeAttestation{}, err
		}
		atts = append(atts, x)
		total += x.BytesVerified
	}
	n, err := a.Store.GetNode(ctx, in.TenantID, in.NodeID)
	if err != nil {
		return kinds.WipeAttestation{}, err
	}
	if err := attest.CheckCoverage(n.Disks, atts, in.NodeID, in.WorkflowID, in.Nonce); err != nil {
		return kinds.WipeAttestation{}, err
	}
	if len(in.Modes) > 0 {
		if err := attest.CheckMode(atts, in.Modes...); err != nil {
			return kinds.WipeAttestation{}, err
		}
	}
	out := kinds.WipeAttestation{Disks: append([]string(nil), n.Disks...), Bytes: total,
		Signer: fmt.Sprintf("%s/%s serial %s", role, identity, serial), Verified: a.now().UTC()}
	out.Mode = modesOf(atts)
	sort.Strings(out.Disks)
	// Recorded for this run: the one thing its move into ready may consume.
	err = a.Store.RecordWipe(ctx, store.WipeRecord{TenantID: in.TenantID, NodeID: in.NodeID, WorkflowID: in.WorkflowID,
		RunID: in.RunID, Mode: out.Mode, Disks: out.Disks, Signer: out.Signer})
	if err != nil {
		return kinds.WipeAttestation{}, err
	}
	for _, x := range atts {
		a.Metrics.WipeVerified(x.Mode, x.BytesVerified)
	}
	return out, nil
}

// modesOf names the modes the disks were wiped in, e.g. "crypto-erase" or
// "crypto-erase+secure-erase".
func modesOf(atts []attest.WipeAttestation) string {
	var modes []string
	for _, a := range atts {
		if !slices.Contains(modes, a.Mode) {
			modes = append(modes, a.Mode)
		}
	}
	sort.Strings(modes)
	return strings.Join(modes, "+")
}
