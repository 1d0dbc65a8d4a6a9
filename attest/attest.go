// Package attest owns the wipe attestation: the result a machine's ramdisk
// signs for each wiped disk with its ed25519 key (certified at join by the
// PKI), and the control plane's checks of it: the signature, and that the
// attestations cover every disk of the inventory for this node, this
// workflow and this nonce, each with its read-back passed. Only then may a
// release move the node to ready.
package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// WipeAttestation is what the machine says about one disk's wipe.
type WipeAttestation struct {
	NodeID        string    `json:"nodeId"`
	WorkflowID    string    `json:"workflowId"`
	Nonce         string    `json:"nonce"` // chosen by the control plane per release; defeats replay
	Disk          string    `json:"disk"`  // "wwn-0x…" or "serial-…"
	Mode          string    `json:"mode"`  // quick, secure-erase, crypto-erase
	BytesVerified int64     `json:"bytesVerified"`
	Verified      bool      `json:"verified"`
	Finished      time.Time `json:"finished"`
}

// Signed is a signed attestation as it travels: the canonical JSON payload,
// the ed25519 signature over it, and the id of the signing key.
type Signed struct {
	Payload   []byte `json:"payload"`
	Signature []byte `json:"signature"`
	KeyID     string `json:"keyId"`
}

// KeyID names an ed25519 public key: "ed25519:" and the first 16 bytes of
// its SHA-256, base64url.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// canonical returns the one encoding that is signed: the struct's fields in
// declaration order, Finished in UTC with nanoseconds, no HTML escaping, no
// trailing newline.
func canonical(a WipeAttestation) ([]byte, error) {
	a.Finished = a.Finished.UTC()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Sign signs a with priv.
func Sign(priv ed25519.PrivateKey, a WipeAttestation) (Signed, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return Signed{}, errs.Invalid("key", "not an ed25519 private key (%d bytes)", len(priv))
	}
	p, err := canonical(a)
	if err != nil {
		return Signed{}, errs.Wrap(errs.Internal, err, "encode attestation")
	}
	pub := priv.Public().(ed25519.PublicKey)
	return Signed{Payload: p, Signature: ed25519.Sign(priv, p), KeyID: KeyID(pub)}, nil
}

// Verify checks s against pub and returns the attestation it carries. A bad
// signature, a key id that is not pub's, or a payload that is not the
// canonical encoding of an attestation is UNVERIFIED_WIPE.
func Verify(pub ed25519.PublicKey, s Signed) (WipeAttestation, error) {
	if len(pub) != ed25519.PublicKeySize {
		return WipeAttestation{}, errs.Invalid("key", "not an ed25519 public key (%d bytes)", len(pub))
	}
	if s.KeyID != KeyID(pub) {
		return WipeAttestation{}, errs.New(errs.UnverifiedWipe, "attestation signed by key %q, expected the node's key %s", s.KeyID, KeyID(pub))
	}
	if !ed25519.Verify(pub, s.Payload, s.Signature) {
		return WipeAttestation{}, errs.New(errs.UnverifiedWipe, "attestation signature does not verify with the node's key %s", KeyID(pub))
	}
	var a WipeAttestation
	dec := json.NewDecoder(bytes.NewReader(s.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return WipeAttestation{}, errs.Wrap(errs.UnverifiedWipe, err, "attestation payload is not a wipe attestation")
	}
	if c, err := canonical(a); err != nil || !bytes.Equal(c, s.Payload) {
		return WipeAttestation{}, errs.New(errs.UnverifiedWipe, "attestation payload is not in canonical form")
	}
	return a, nil
}

// CheckCoverage checks that atts, already signature-verified, prove this
// release's wipe: every attestation is for nodeID, workflowID and nonce (one
// from another node, run or release is a replay), and every disk of the
// inventory has one with its read-back passed and none that failed. It
// returns UNVERIFIED_WIPE naming the offending or missing disks.
func CheckCoverage(inventory []string, atts []WipeAttestation, nodeID, workflowID, nonce string) error {
	if len(inventory) == 0 {
		return errs.New(errs.UnverifiedWipe, "node %s: the inventory lists no disks, so no wipe can be attested; run inventory.refresh", nodeID)
	}
	if nonce == "" {
		return errs.Invalid("nonce", "a coverage check needs the release's nonce")
	}
	verified := map[string]bool{}
	failed := map[string]bool{}
	for _, a := range atts {
		switch {
		case a.NodeID != nodeID:
			return errs.New(errs.UnverifiedWipe, "attestation for disk %s is for node %q, not %s (replayed?)", a.Disk, a.NodeID, nodeID)
		case a.WorkflowID != workflowID:
			return errs.New(errs.UnverifiedWipe, "attestation for disk %s is from workflow %q, not %s (replayed?)", a.Disk, a.WorkflowID, workflowID)
		case a.Nonce != nonce:
			return errs.New(errs.UnverifiedWipe, "attestation for disk %s carries a stale nonce (replayed?)", a.Disk)
		case a.Verified:
			verified[a.Disk] = true
		default:
			failed[a.Disk] = true
		}
	}
	var missing, bad []string
	for _, d := range inventory {
		switch {
		case failed[d]:
			bad = append(bad, d)
		case !verified[d]:
			missing = append(missing, d)
		}
	}
	sort.Strings(bad)
	sort.Strings(missing)
	var parts []string
	if len(bad) > 0 {
		parts = append(parts, "read-back failed on "+strings.Join(bad, ", "))
	}
	if len(missing) > 0 {
		parts = append(parts, "no attested wipe for "+strings.Join(missing, ", "))
	}
	if len(parts) > 0 {
		return errs.New(errs.UnverifiedWipe, "node %s: %s; wipe again or recover the node", nodeID, strings.Join(parts, "; "))
	}
	return nil
}

// CheckMode checks that every attestation is for the wipe mode the release asked for.
func CheckMode(atts []WipeAttestation, modes ...string) error {
	for _, a := range atts {
		if !slices.Contains(modes, a.Mode) {
			return errs.New(errs.UnverifiedWipe, "disk %s was wiped %s, the workflow asked for %s", a.Disk, a.Mode, strings.Join(modes, " or "))
		}
	}
	return nil
}

// String is a one-line summary for logs (no secrets in an attestation).
func (a WipeAttestation) String() string {
	return fmt.Sprintf("%s/%s disk=%s mode=%s verified=%t bytes=%d", a.NodeID, a.WorkflowID, a.Disk, a.Mode, a.Verified, a.BytesVerified)
}
