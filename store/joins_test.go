package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
)

// TestJoinSpendsTokenWithCertificate: a join spends its token in the
// statement that records its certificate. When the certificate cannot be
// issued (the CA fails) or recorded (the database refuses it), the token
// stays unspent, so the agent's retry with the same token joins; before,
// the token was spent first and the retry was refused as a token already
// used, leaving a ramdisk that could never join. A site token likewise.
func TestJoinSpendsTokenWithCertificate(t *testing.T) {
	t.Parallel()
	s, site := newSite(t)
	ctx := t.Context()
	n := newNodeIn(t, s, site, "bcd", store.PoolPolicy{})
	hash := []byte("hash of a discovery token")
	tok := store.JoinToken{ID: ids.New(ids.JoinToken), TenantID: "a", SiteID: site.ID, NodeID: n.ID, Kind: "disc",
		ExpiresAt: time.Now().Add(time.Hour)}
	if err := s.CreateJoinToken(ctx, tok, hash); err != nil {
		t.Fatal(err)
	}
	cert := func(serial string, t store.JoinToken) store.Certificate {
		return store.Certificate{Serial: serial, TenantID: t.TenantID, Role: "ramdisk", Identity: t.NodeID, SiteID: t.SiteID,
			TokenID: t.ID, PublicKey: []byte("k"), CertPEM: []byte("x"), ExpiresAt: time.Now().Add(time.Hour)}
	}
	if err := s.RecordCertificate(ctx, cert("taken", tok)); err != nil {
		t.Fatal(err)
	}

	caDown := errs.New(errs.Unavailable, "the CA is down")
	_, err := s.ConsumeJoinToken(ctx, hash, "disc", site.ID, time.Now(), func(store.JoinToken) (store.Certificate, error) {
		return store.Certificate{}, caDown
	})
	if !errors.Is(err, caDown) {
		t.Fatalf("join whose certificate cannot be issued = %v; want the CA's error as it is", err)
	}
	_, err = s.ConsumeJoinToken(ctx, hash, "disc", site.ID, time.Now(), func(t store.JoinToken) (store.Certificate, error) {
		return cert("taken", t), nil // a serial on record already: the insert fails
	})
	wantKind(t, "join whose certificate cannot be recorded", err, errs.AlreadyExists)

	var issued string
	got, err := s.ConsumeJoinToken(ctx, hash, "disc", site.ID, time.Now(), func(t store.JoinToken) (store.Certificate, error) {
		issued = t.NodeID
		return cert("fresh", t), nil
	})
	if err != nil || got.ID != tok.ID || issued != n.ID {
		t.Fatalf("the retry with the same token = %+v, %v (certified %q); want token %s admitting node %s", got, err, issued, tok.ID, n.ID)
	}
	if revoked, err := s.CertificateRevoked(ctx, "fresh"); err != nil || revoked {
		t.Errorf("the joined agent's certificate: revoked or unknown = %v, %v; want on record", revoked, err)
	}
	signed := false
	_, err = s.ConsumeJoinToken(ctx, hash, "disc", site.ID, time.Now(), func(t store.JoinToken) (store.Certificate, error) {
		signed = true
		return cert("again", t), nil
	})
	wantKind(t, "a second join with the spent token", err, errs.Unauthenticated)
	if signed {
		t.Error("a join with a spent token had a certificate issued; want it refused before")
	}

	siteHash := []byte("hash of a site token")
	st, _, err := s.CreateSiteToken(ctx, store.SiteToken{TenantID: "a", SiteID: site.ID, ExpiresAt: time.Now().Add(time.Hour)}, siteHash)
	if err != nil {
		t.Fatal(err)
	}
	siteCert := func(serial string, t store.SiteToken) store.Certificate {
		return store.Certificate{Serial: serial, TenantID: t.TenantID, Role: "site", Identity: t.SiteID, SiteID: t.SiteID,
			TokenID: t.ID, PublicKey: []byte("k"), CertPEM: []byte("x"), ExpiresAt: time.Now().Add(time.Hour)}
	}
	_, err = s.ConsumeSiteToken(ctx, siteHash, time.Now(), func(t store.SiteToken) (store.Certificate, error) {
		return siteCert("taken", t), nil
	})
	wantKind(t, "site join whose certificate cannot be recorded", err, errs.AlreadyExists)
	if got, err := s.ConsumeSiteToken(ctx, siteHash, time.Now(), func(t store.SiteToken) (store.Certificate, error) {
		return siteCert("site-fresh", t), nil
	}); err != nil || got.ID != st.ID {
		t.Fatalf("the site's retry with the same token = %+v, %v; want token %s", got, err, st.ID)
	}
}

// spendJoin and spendSite are certify functions for tests that spend a
// token and look only at the token: each issues a certificate of a serial
// of its own.
func spendJoin(t store.JoinToken) (store.Certificate, error) {
	return store.Certificate{Serial: ids.New(ids.JoinToken), TenantID: t.TenantID, Role: "ramdisk", Identity: t.NodeID,
		SiteID: t.SiteID, TokenID: t.ID, PublicKey: []byte("k"), CertPEM: []byte("x"), ExpiresAt: t.ExpiresAt}, nil
}

func spendSite(t store.SiteToken) (store.Certificate, error) {
	return store.Certificate{Serial: ids.New(ids.JoinToken), TenantID: t.TenantID, Role: "site", Identity: t.SiteID,
		SiteID: t.SiteID, TokenID: t.ID, PublicKey: []byte("k"), CertPEM: []byte("x"), ExpiresAt: t.ExpiresAt}, nil
}
