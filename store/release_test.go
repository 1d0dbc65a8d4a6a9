package store_test

import (
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/nodestate"
	"github.com/better-compute/better-compute/store"
)

// TestReleaseRevokesTheOSAgent: when a deployed node is released, the
// certificates of its installed OS's bcd node (role node) are revoked in
// the same move, so an agent whose key outlives the wipe (copied off the
// machine) cannot renew itself into the node's next deployment; the
// release's own ramdisk (role ramdisk, same identity) keeps its certificate,
// and the install's unused provisioned token is spent.
func TestReleaseRevokesTheOSAgent(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	n, run := wipedNode(t, s, site)
	move(t, s, n.ID, nodestate.Inspecting, nodestate.Ready, store.TransitionInfo{Run: run})
	move(t, s, n.ID, nodestate.Ready, nodestate.Deploying, store.TransitionInfo{})
	move(t, s, n.ID, nodestate.Deploying, nodestate.Deployed, store.TransitionInfo{})
	for serial, role := range map[string]string{"a1": "node", "a2": "ramdisk"} {
		if err := s.RecordCertificate(ctx, store.Certificate{Serial: serial, TenantID: "a", Role: role, Identity: n.ID,
			SiteID: site.ID, TokenID: "jtok_" + serial, PublicKey: []byte("k"), CertPEM: []byte("x"), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	other := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	if err := s.RecordCertificate(ctx, store.Certificate{Serial: "b1", TenantID: "a", Role: "node", Identity: other.ID,
		SiteID: site.ID, TokenID: "jtok_b1", PublicKey: []byte("k"), CertPEM: []byte("x"), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	hash := []byte("hash of the install's token")
	if err := s.CreateJoinToken(ctx, store.JoinToken{ID: ids.New(ids.JoinToken), TenantID: "a", SiteID: site.ID, NodeID: n.ID,
		Kind: "prov", ExpiresAt: time.Now().Add(time.Hour)}, hash); err != nil {
		t.Fatal(err)
	}

	move(t, s, n.ID, nodestate.Deployed, nodestate.Releasing, store.TransitionInfo{})
	_, err := s.ConsumeJoinToken(ctx, hash, "prov", "", time.Now(), spendJoin)
	wantKind(t, "ConsumeJoinToken(the install's token) after the release", err, errs.Unauthenticated)
	for serial, want := range map[string]bool{"a1": true, "a2": false, "b1": false} {
		if got, err := s.CertificateRevoked(ctx, serial); err != nil || got != want {
			t.Errorf("certificate %s revoked after the release = %v, %v; want %v", serial, got, err, want)
		}
	}
}
