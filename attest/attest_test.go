package attest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
)

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func sample(disk string) WipeAttestation {
	return WipeAttestation{NodeID: "node_01", WorkflowID: "wf-1", Nonce: "n-1", Disk: disk, Mode: "quick",
		BytesVerified: 16 << 40, Verified: true,
		Finished: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))}
}

func TestSignVerify(t *testing.T) {
	t.Parallel()
	pub, priv := newKey(t)
	otherPub, otherPriv := newKey(t)
	a := sample("wwn-0x5000c500a1b2c3d4")
	good, err := Sign(priv, a)
	if err != nil {
		t.Fatal(err)
	}
	tamper := func(f func(*Signed)) Signed {
		s := Signed{Payload: bytes.Clone(good.Payload), Signature: bytes.Clone(good.Signature), KeyID: good.KeyID}
		f(&s)
		return s
	}
	byOther, _ := Sign(otherPriv, a)
	tests := []struct {
		name string
		pub  ed25519.PublicKey
		s    Signed
		want errs.Kind
	}{
		{"good", pub, good, ""},
		{"tampered payload", pub, tamper(func(s *Signed) {
			s.Payload = bytes.Replace(s.Payload, []byte(`"verified":true`), []byte(`"verified":false`), 1)
		}), errs.UnverifiedWipe},
		{"verified flipped to true", pub, func() Signed {
			b := a
			b.Verified = false
			s, _ := Sign(priv, b)
			s.Payload = bytes.Replace(s.Payload, []byte(`"verified":false`), []byte(`"verified":true`), 1)
			return s
		}(), errs.UnverifiedWipe},
		{"tampered signature", pub, tamper(func(s *Signed) { s.Signature[0] ^= 1 }), errs.UnverifiedWipe},
		{"other key", otherPub, good, errs.UnverifiedWipe},
		{"signed by other key, key id swapped", pub, func() Signed { s := byOther; s.KeyID = good.KeyID; return s }(), errs.UnverifiedWipe},
		{"short key", pub[:10], good, errs.InvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Verify(tt.pub, tt.s)
			if k := errs.KindOf(err); k != tt.want {
				t.Fatalf("Verify() error = %v (kind %q), want kind %q", err, k, tt.want)
			}
			if err != nil {
				return
			}
			want := a
			want.Finished = a.Finished.UTC()
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Verify() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerifyRejectsNonCanonical(t *testing.T) {
	t.Parallel()
	pub, priv := newKey(t)
	// a payload the key really signed, but with an extra field or other spacing
	for _, p := range []string{
		`{"nodeId":"node_01","workflowId":"wf-1","nonce":"n-1","disk":"d","mode":"quick","bytesVerified":1,"verified":true,"finished":"2026-03-01T11:00:00Z","extra":1}`,
		`{"nodeId": "node_01","workflowId":"wf-1","nonce":"n-1","disk":"d","mode":"quick","bytesVerified":1,"verified":true,"finished":"2026-03-01T11:00:00Z"}`,
	} {
		s := Signed{Payload: []byte(p), Signature: ed25519.Sign(priv, []byte(p)), KeyID: KeyID(pub)}
		if _, err := Verify(pub, s); !errs.Is(err, errs.UnverifiedWipe) {
			t.Errorf("Verify(%s) = %v, want UNVERIFIED_WIPE", p, err)
		}
	}
}

func TestCheckCoverage(t *testing.T) {
	t.Parallel()
	inv := []string{"wwn-0xa", "serial-B"}
	ok := []WipeAttestation{sample("wwn-0xa"), sample("serial-B")}
	with := func(i int, f func(*WipeAttestation)) []WipeAttestation {
		c := append([]WipeAttestation(nil), ok...)
		f(&c[i])
		return c
	}
	tests := []struct {
		name    string
		inv     []string
		atts    []WipeAttestation
		nonce   string
		wantErr string // substring; "" means no error
	}{
		{"all covered", inv, ok, "n-1", ""},
		{"extra disk attested", inv, append(ok, sample("wwn-0xc")), "n-1", ""},
		{"missing disk", inv, ok[:1], "n-1", "no attested wipe for serial-B"},
		{"none at all", inv, nil, "n-1", "no attested wipe for serial-B, wwn-0xa"},
		{"unverified disk", inv, with(1, func(a *WipeAttestation) { a.Verified = false }), "n-1", "read-back failed on serial-B"},
		{"verified and failed for one disk", inv, append(ok, func() WipeAttestation { a := sample("wwn-0xa"); a.Verified = false; return a }()), "n-1", "read-back failed on wwn-0xa"},
		{"wrong nonce (replay)", inv, ok, "n-2", "stale nonce"},
		{"wrong node", inv, with(0, func(a *WipeAttestation) { a.NodeID = "node_02" }), "n-1", `node "node_02"`},
		{"wrong workflow", inv, with(0, func(a *WipeAttestation) { a.WorkflowID = "wf-0" }), "n-1", `workflow "wf-0"`},
		{"empty inventory", nil, ok, "n-1", "lists no disks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckCoverage(tt.inv, tt.atts, "node_01", "wf-1", tt.nonce)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckCoverage() = %v, want nil", err)
				}
				return
			}
			if !errs.Is(err, errs.UnverifiedWipe) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckCoverage() = %v, want UNVERIFIED_WIPE containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckMode(t *testing.T) {
	t.Parallel()
	atts := []WipeAttestation{sample("a"), sample("b")}
	if err := CheckMode(atts, "quick"); err != nil {
		t.Errorf("CheckMode(quick) = %v, want nil", err)
	}
	if err := CheckMode(atts, "secure-erase"); !errs.Is(err, errs.UnverifiedWipe) {
		t.Errorf("CheckMode(secure-erase) = %v, want UNVERIFIED_WIPE", err)
	}
}
