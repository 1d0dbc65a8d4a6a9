package controlplane_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/attest"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// fixture is a migrated store with a tenant, a site and a pool, a CA, and
// the activities over them.
type fixture struct {
	s                  *store.Store
	ca                 *pki.CA
	act                *controlplane.Activities
	tenant, site, pool string
	now                time.Time
}

func newFixture(t *testing.T, agent string, policy store.PoolPolicy) *fixture {
	t.Helper()
	ctx := t.Context()
	f := &fixture{s: testpg.New(t), tenant: "acme", now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	ca, err := pki.Init(filepath.Join(t.TempDir(), "pki"), "test.better-compute.test")
	if err != nil {
		t.Fatalf("pki.Init = %v", err)
	}
	f.ca = ca
	f.act = &controlplane.Activities{Store: f.s, CA: ca, Now: func() time.Time { return f.now }}
	if err := f.s.CreateTenant(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	site, _, err := f.s.CreateSite(ctx, store.Site{TenantID: f.tenant, Kind: "shared", Region: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := f.s.CreatePool(ctx, store.Pool{TenantID: f.tenant, SiteID: site.ID, Class: "metal-host", Agent: agent, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	f.site, f.pool = site.ID, pool.ID
	return f
}

// newNode enrolls a node with disks already inventoried.
func (f *fixture) newNode(t *testing.T, disks ...string) string {
	t.Helper()
	id := ids.New(ids.Node)
	n, err := f.s.CreateNode(t.Context(), store.Node{ID: id, TenantID: f.tenant, SiteID: f.site, PoolID: f.pool,
		BMCAddress: "https://bmc-" + id + ".test/redfish/v1/Systems/1", BMCDriver: "redfish",
		BMCCredentialsRef: "env://BMC", MACs: []string{"52:54:00:00:00:01"}})
	if err != nil {
		t.Fatalf("CreateNode = %v", err)
	}
	if len(disks) > 0 {
		if err := f.s.RecordFacts(t.Context(), f.tenant, n.ID, store.NodeFacts{Disks: disks}); err != nil {
			t.Fatal(err)
		}
	}
	return n.ID
}

// signer is a ramdisk's key and the certificate ca issued for it.
type signer struct {
	key     ed25519.PrivateKey
	certPEM []byte
	serial  string
}

// issue certifies a fresh ed25519 key as role/identity with ca and, when
// record, records the certificate as the JoinService does.
func (f *fixture) issue(t *testing.T, ca *pki.CA, role pki.Role, identity string, record bool) signer {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(pub, role, identity, time.Hour)
	if err != nil {
		t.Fatalf("Issue(%s, %s) = %v", role, identity, err)
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	sg := signer{key: key, certPEM: certPEM, serial: cert.SerialNumber.Text(16)}
	if record {
		pubPEM, _ := pki.MarshalPublicKey(pub)
		if err := f.s.RecordCertificate(t.Context(), store.Certificate{Serial: sg.serial, TenantID: f.tenant,
			Role: string(role), Identity: identity, SiteID: f.site, TokenID: ids.New(ids.JoinToken),
			PublicKey: pubPEM, CertPEM: certPEM, ExpiresAt: cert.NotAfter}); err != nil {
			t.Fatalf("RecordCertificate = %v", err)
		}
	}
	return sg
}

// wipeResult is a disk.wipe result as the ramdisk makes it: each
// attestation signed with key, the list signed again as the result payload.
func wipeResult(t *testing.T, key ed25519.PrivateKey, certPEM []byte, atts []attest.WipeAttestation) kinds.Result {
	t.Helper()
	signed := make([]attest.Signed, 0, len(atts))
	for _, a := range atts {
		s, err := attest.Sign(key, a)
		if err != nil {
			t.Fatal(err)
		}
		signed = append(signed, s)
	}
	return resultOf(t, key, certPEM, signed)
}

func resultOf(t *testing.T, key ed25519.PrivateKey, certPEM []byte, signed []attest.Signed) kinds.Result {
	t.Helper()
	payload, err := json.Marshal(signed)
	if err != nil {
		t.Fatal(err)
	}
	return kinds.Result{CommandID: "metal/n/run/07", Kind: kinds.DiskWipe, OK: true, Payload: payload,
		Signature: ed25519.Sign(key, payload), CertPEM: certPEM, Finished: time.Now().UTC()}
}

const (
	testWorkflow = "metal/node"
	testNonce    = "metal/node/run-1"
)

func attestations(node string, disks ...string) []attest.WipeAttestation {
	var out []attest.WipeAttestation
	for _, d := range disks {
		out = append(out, attest.WipeAttestation{NodeID: node, WorkflowID: testWorkflow, Nonce: testNonce, Disk: d,
			Mode: "quick", BytesVerified: 1 << 20, Verified: true, Finished: time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)})
	}
	return out
}

func TestVerifyWipeAccepts(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t, "wwn-0x2", "wwn-0x1")
	sg := f.issue(t, f.ca, pki.RoleRamdisk, node, true)
	in := kinds.VerifyWipeInput{TenantID: f.tenant, NodeID: node, WorkflowID: testWorkflow, Nonce: testNonce,
		Result: wipeResult(t, sg.key, sg.certPEM, attestations(node, "wwn-0x1", "wwn-0x2"))}
	got, err := f.act.VerifyWipe(t.Context(), in)
	if err != nil {
		t.Fatalf("VerifyWipe(signed by the node's ramdisk) = %v, want nil", err)
	}
	want := kinds.WipeAttestation{Mode: "quick", Disks: []string{"wwn-0x1", "wwn-0x2"}, Bytes: 2 << 20,
		Signer: "ramdisk/" + node + " serial " + sg.serial, Verified: f.now}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("VerifyWipe() (-want +got):\n%s", diff)
	}
}

// wipeCase builds a VerifyWipe input for a fresh node with disks d1 and d2
// and says what the refusal must mention.
type wipeCase struct {
	name  string
	build func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities)
	want  string // in the error message
}

func TestVerifyWipeRefuses(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	other, err := pki.Init(filepath.Join(t.TempDir(), "other"), "test.better-compute.test")
	if err != nil {
		t.Fatal(err)
	}
	// good returns a proper input, with the signer and attestations edited by edit.
	good := func(edit func(f *fixture, node string, sg *signer, atts []attest.WipeAttestation) []attest.WipeAttestation) func(*testing.T, *fixture, string) (kinds.VerifyWipeInput, *controlplane.Activities) {
		return func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities) {
			sg := f.issue(t, f.ca, pki.RoleRamdisk, node, true)
			atts := attestations(node, "d1", "d2")
			if edit != nil {
				atts = edit(f, node, &sg, atts)
			}
			return kinds.VerifyWipeInput{TenantID: f.tenant, NodeID: node, WorkflowID: testWorkflow, Nonce: testNonce,
				Result: wipeResult(t, sg.key, sg.certPEM, atts)}, f.act
		}
	}
	cases := []wipeCase{
		{name: "bad result signature", want: "signature does not verify", build: func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities) {
			in, act := good(nil)(t, f, node)
			in.Result.Signature[0] ^= 0xff
			return in, act
		}},
		{name: "tampered attestation payload", want: "attestation signature does not verify", build: func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities) {
			sg := f.issue(t, f.ca, pki.RoleRamdisk, node, true)
			var signed []attest.Signed
			for _, a := range attestations(node, "d1", "d2") {
				s, _ := attest.Sign(sg.key, a)
				signed = append(signed, s)
			}
			// A failed read-back rewritten as passed; the outer result is
			// signed again over the edited list, the attestation is not.
			signed[1].Payload = []byte(strings.Replace(string(signed[1].Payload), `"bytesVerified":1048576`, `"bytesVerified":1048577`, 1))
			return kinds.VerifyWipeInput{TenantID: f.tenant, NodeID: node, WorkflowID: testWorkflow, Nonce: testNonce,
				Result: resultOf(t, sg.key, sg.certPEM, signed)}, f.act
		}},
		{name: "attestation signed by another key", want: "expected the node's key", build: func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities) {
			sg := f.issue(t, f.ca, pki.RoleRamdisk, node, true)
			_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
			var signed []attest.Signed
			for _, a := range attestations(node, "d1", "d2") {
				s, _ := attest.Sign(otherKey, a)
				signed = append(signed, s)
			}
			return kinds.VerifyWipeInput{TenantID: f.tenant, NodeID: node, WorkflowID: testWorkflow, Nonce: testNonce,
				Result: resultOf(t, sg.key, sg.certPEM, signed)}, f.act
		}},
		{name: "cert from another CA", want: "not ours", build: good(func(f *fixture, node string, sg *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			*sg = f.issue(t, other, pki.RoleRamdisk, node, false)
			return atts
		})},
		{name: "cert for another node", want: "not by this node's ramdisk", build: good(func(f *fixture, node string, sg *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			*sg = f.issue(t, f.ca, pki.RoleRamdisk, f.newNode(t, "d1", "d2"), true)
			return atts
		})},
		{name: "cert of role site", want: "signed by site", build: good(func(f *fixture, node string, sg *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			*sg = f.issue(t, f.ca, pki.RoleSite, node, true)
			return atts
		})},
		{name: "revoked cert", want: "revoked", build: good(func(f *fixture, node string, sg *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			if n, err := f.s.RevokeIdentity(t.Context(), f.tenant, node); err != nil || n != 1 {
				t.Fatalf("RevokeIdentity = %d, %v; want 1 revoked", n, err)
			}
			return atts
		})},
		{name: "unknown serial", want: "never issued here", build: good(func(f *fixture, node string, sg *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			*sg = f.issue(t, f.ca, pki.RoleRamdisk, node, false)
			return atts
		})},
		{name: "missing disk", want: "no attested wipe for d2", build: good(func(_ *fixture, _ string, _ *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			return atts[:1]
		})},
		{name: "read-back failed", want: "read-back failed on d2", build: good(func(_ *fixture, _ string, _ *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			atts[1].Verified = false
			return atts
		})},
		{name: "wrong nonce (replay)", want: "stale nonce", build: good(func(_ *fixture, _ string, _ *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			atts[0].Nonce = "metal/node/run-0"
			return atts
		})},
		{name: "another workflow (replay)", want: "from workflow", build: good(func(_ *fixture, _ string, _ *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			atts[1].WorkflowID = "metal/other"
			return atts
		})},
		{name: "attestation of another node (replay)", want: "is for node", build: good(func(_ *fixture, _ string, _ *signer, atts []attest.WipeAttestation) []attest.WipeAttestation {
			atts[0].NodeID = "node_other"
			return atts
		})},
		{name: "weaker mode than asked", want: "the workflow asked for secure-erase or crypto-erase", build: func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities) {
			in, act := good(nil)(t, f, node)
			in.Modes = []string{"secure-erase", "crypto-erase"}
			return in, act
		}},
		{name: "no certificate", want: "no valid certificate", build: func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities) {
			in, act := good(nil)(t, f, node)
			in.Result.CertPEM = nil
			return in, act
		}},
		{name: "no CA configured", want: "no CA", build: func(t *testing.T, f *fixture, node string) (kinds.VerifyWipeInput, *controlplane.Activities) {
			in, _ := good(nil)(t, f, node)
			return in, &controlplane.Activities{Store: f.s}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			node := f.newNode(t, "d1", "d2")
			in, act := tc.build(t, f, node)
			_, err := act.VerifyWipe(t.Context(), in)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != "UNVERIFIED_WIPE" || !app.NonRetryable() {
				t.Fatalf("VerifyWipe(%s) = %v, want a non-retryable UNVERIFIED_WIPE application error", tc.name, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("VerifyWipe(%s) = %q, want it to mention %q", tc.name, err, tc.want)
			}
		})
	}
}
