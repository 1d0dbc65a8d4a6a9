package controlplane_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

var errRollBack = errors.New("roll back")

// inTx runs fn in a transaction, committed when commit is set.
func (f *fixture) inTx(t *testing.T, commit bool, fn func(tx pgx.Tx) error) error {
	t.Helper()
	err := pgx.BeginFunc(t.Context(), f.s.Pool(), func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if !commit {
			return errRollBack
		}
		return nil
	})
	if errors.Is(err, errRollBack) {
		return nil
	}
	return err
}

func (f *fixture) sdkNode(node string) sdk.Node {
	return sdk.Node{ID: node, TenantID: f.tenant, SiteID: f.site}
}

// A provisioned token exists only if the step's transaction commits, and
// admits one join once.
func TestIssueJoinTokenInTransaction(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t)
	p := controlplane.JoinTokens{Now: func() time.Time { return f.now }}
	req := sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, TTL: 3 * time.Hour, MaxUses: 1}
	kind := string(pki.TokenProvisioned)
	for _, commit := range []bool{false, true} {
		var tok sdk.JoinToken
		if err := f.inTx(t, commit, func(tx pgx.Tx) (err error) {
			tok, err = p.IssueJoinToken(t.Context(), tx, f.sdkNode(node), req)
			return err
		}); err != nil {
			t.Fatalf("IssueJoinToken(commit %v) = %v", commit, err)
		}
		if s := fmt.Sprintf("%v %+v %#v", tok, tok, tok); strings.Contains(s, string(tok.Token)) || !strings.HasPrefix(string(tok.Token), "bcprov_") {
			t.Fatalf("IssueJoinToken printed %q, want a bcprov_ token that prints redacted", s)
		}
		jt, err := f.s.ConsumeJoinToken(t.Context(), pki.HashToken(string(tok.Token)), kind, "", f.now, spendToken)
		if !commit {
			if !errs.Is(err, errs.Unauthenticated) || !strings.Contains(err.Error(), "unknown") {
				t.Errorf("ConsumeJoinToken(rolled back) = %v, want unknown join token", err)
			}
			continue
		}
		if err != nil || jt.NodeID != node || jt.SiteID != f.site || !jt.ExpiresAt.Equal(f.now.Add(3*time.Hour)) {
			t.Fatalf("ConsumeJoinToken(committed) = %+v, %v, want node %s site %s expiring in 3h", jt, err, node, f.site)
		}
		if _, err := f.s.ConsumeJoinToken(t.Context(), pki.HashToken(string(tok.Token)), kind, "", f.now, spendToken); !errs.Is(err, errs.Unauthenticated) {
			t.Errorf("ConsumeJoinToken(again) = %v, want UNAUTHENTICATED", err)
		}
	}
}

func TestIssueJoinTokenBounds(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t)
	p := controlplane.JoinTokens{Now: func() time.Time { return f.now }}
	cases := []struct {
		req   sdk.JoinTokenRequest
		field string
		ttl   time.Duration
	}{
		{req: sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 1}, ttl: controlplane.DefaultProvisionedTTL},
		{req: sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 1, TTL: 24 * time.Hour}, ttl: 24 * time.Hour},
		{req: sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 1, TTL: 25 * time.Hour}, field: "ttl"},
		{req: sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 1, TTL: -time.Second}, field: "ttl"},
		{req: sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 2}, field: "maxUses"},
		{req: sdk.JoinTokenRequest{Role: sdk.RoleProvisioned}, field: "maxUses"},
		{req: sdk.JoinTokenRequest{Role: "site", MaxUses: 1}, field: "role"},
	}
	for _, tc := range cases {
		var tok sdk.JoinToken
		err := f.inTx(t, true, func(tx pgx.Tx) (err error) {
			tok, err = p.IssueJoinToken(t.Context(), tx, f.sdkNode(node), tc.req)
			return err
		})
		var e *errs.Error
		switch {
		case tc.field == "" && (err != nil || !tok.ExpiresAt.Equal(f.now.Add(tc.ttl))):
			t.Errorf("IssueJoinToken(%+v) = expires %s, %v, want %s", tc.req, tok.ExpiresAt, err, f.now.Add(tc.ttl))
		case tc.field != "" && (!errors.As(err, &e) || e.Kind != errs.InvalidInput || e.Field != tc.field):
			t.Errorf("IssueJoinToken(%+v) = %v, want INVALID_INPUT naming %s", tc.req, err, tc.field)
		}
	}
	err := f.inTx(t, true, func(tx pgx.Tx) error {
		_, err := p.IssueJoinToken(t.Context(), tx, sdk.Node{ID: node, TenantID: "other"}, sdk.JoinTokenRequest{Role: sdk.RoleProvisioned, MaxUses: 1})
		return err
	})
	if !errs.Is(err, errs.NotFound) {
		t.Errorf("IssueJoinToken(another tenant's node) = %v, want NOT_FOUND", err)
	}
}

// Publish stores the file in the step's transaction and names the URL the
// node's site serves it at; another site, an expired one and a rolled-back
// one are not found.
func TestPublishArtifact(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	node := f.newNode(t)
	p := controlplane.ArtifactStore{Now: func() time.Time { return f.now }}
	data := []byte("#cloud-config\n")
	publish := func(commit bool) (url string, err error) {
		err = f.inTx(t, commit, func(tx pgx.Tx) (err error) {
			url, err = p.Publish(t.Context(), tx, f.sdkNode(node), "seed.iso", data, time.Hour)
			return err
		})
		return url, err
	}
	if _, err := publish(true); !errs.Is(err, errs.InvalidState) {
		t.Fatalf("Publish(site that said no URL) = %v, want INVALID_STATE", err)
	}
	if err := f.s.SetArtifactsURL(t.Context(), f.site, "http://10.0.0.2:8080"); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		url, err := publish(commit)
		id, ok := strings.CutPrefix(url, "http://10.0.0.2:8080/artifacts/")
		id, name, _ := strings.Cut(id, "/")
		if err != nil || !ok || name != "seed.iso" || !store.ValidArtifactID(id) {
			t.Fatalf("Publish = %q, %v, want http://10.0.0.2:8080/artifacts/<52 base32 chars>/seed.iso", url, err)
		}
		a, got, err := f.s.SiteArtifact(t.Context(), f.site, id, f.now)
		if !commit {
			if !errs.Is(err, errs.NotFound) {
				t.Errorf("SiteArtifact(rolled back) = %v, want NOT_FOUND", err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, data) || a.NodeID != node || a.Name != "seed.iso" || len(a.SHA256) != 64 {
			t.Fatalf("SiteArtifact = %+v, %q, %v, want the published bytes", a, got, err)
		}
		if _, _, err := f.s.SiteArtifact(t.Context(), "site_other", id, f.now); !errs.Is(err, errs.NotFound) {
			t.Errorf("SiteArtifact(another site) = %v, want NOT_FOUND", err)
		}
		if _, _, err := f.s.SiteArtifact(t.Context(), f.site, id, f.now.Add(time.Hour)); !errs.Is(err, errs.NotFound) {
			t.Errorf("SiteArtifact(expired) = %v, want NOT_FOUND", err)
		}
		// The next publish once it expired deletes it.
		f.now = f.now.Add(time.Hour)
		if _, err := publish(true); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := f.s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM artifacts WHERE id = $1`, id).Scan(&n); err != nil || n != 0 {
			t.Errorf("the expired artifact's rows after the next publish = %d, %v, want 0", n, err)
		}
	}
	for _, bad := range []struct {
		name  string
		data  []byte
		ttl   time.Duration
		field string
	}{{"../x", data, time.Hour, "name"}, {"a.iso", nil, time.Hour, "data"}, {"a.iso", data, 25 * time.Hour, "ttl"}} {
		err := f.inTx(t, true, func(tx pgx.Tx) error {
			_, err := p.Publish(context.Background(), tx, f.sdkNode(node), bad.name, bad.data, bad.ttl)
			return err
		})
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.InvalidInput || e.Field != bad.field {
			t.Errorf("Publish(%q, %d bytes, %s) = %v, want INVALID_INPUT naming %s", bad.name, len(bad.data), bad.ttl, err, bad.field)
		}
	}
}
