package siteagent

import (
	"bytes"
	"crypto/rand"
	"testing"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// TestPayloadUnderNewKeyFetchesIt: after a rotation the control plane
// encrypts the tenant's payloads under a key the agent lacks; the agent
// renews once to get it, keeps the old one (which still decrypts what was
// sent before) in join.json, and a payload under another tenant's key stays
// unreadable without a second renewal.
func TestPayloadUnderNewKeyFetchesIt(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	a := startAgent(t, joinedConfig(t, cp))
	tenant, old := a.id.TenantID, a.id.CodecKey
	keys := &siteKeys{a: a}
	ring, err := codec.NewKeyring(keys, keys.keys()...)
	if err != nil {
		t.Fatal(err)
	}
	dc := ring.DataConverter(tenant)
	before, err := dc.ToPayload("before")
	if err != nil {
		t.Fatal(err)
	}
	rotated := randomKey()
	cp.RenewCodecKey.Store(&rotated)
	after := payloadUnder(t, tenant, rotated, "after")

	var got string
	if err := dc.FromPayload(after, &got); err != nil || got != "after" {
		t.Fatalf("FromPayload(under the rotated key) = %q, %v; want after", got, err)
	}
	if err := dc.FromPayload(before, &got); err != nil || got != "before" {
		t.Errorf("FromPayload(under the old key) = %q, %v; want before", got, err)
	}
	if n := cp.Renews.Load(); n != 1 {
		t.Errorf("renewals = %d, want 1", n)
	}
	saved, err := loadIdentity(a.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(saved.CodecKey, rotated) || len(saved.OldCodecKeys) != 1 || !bytes.Equal(saved.OldCodecKeys[0], old) {
		t.Errorf("join.json after the rotation = key %s, old %d keys; want the rotated key and the old one kept",
			codec.KeyID(saved.CodecKey), len(saved.OldCodecKeys))
	}
	if err := dc.FromPayload(payloadUnder(t, "tnt_other", randomKey(), "theirs"), &got); err == nil {
		t.Errorf("FromPayload(another tenant's) = %q, want an error", got)
	}
	if n := cp.Renews.Load(); n != 1 {
		t.Errorf("renewals after another tenant's payload = %d, want still 1 (at most one per %v)", n, keyFetchEvery)
	}
}

func randomKey() []byte {
	k := make([]byte, codec.KeySize)
	_, _ = rand.Read(k)
	return k
}

func payloadUnder(t *testing.T, tenant string, key []byte, v string) *commonpb.Payload {
	t.Helper()
	r, err := codec.NewKeyring(nil, codec.Key{ID: codec.KeyID(key), Tenant: tenant, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.DataConverter(tenant).ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
