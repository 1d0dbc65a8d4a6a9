package store_test

import (
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/testpg"
)

func TestTenants(t *testing.T) {
	t.Parallel()
	s := testpg.New(t)
	ctx := t.Context()
	if ok, err := s.TenantExists(ctx, "root"); ok || err != nil {
		t.Fatalf("TenantExists(root) before create = %v, %v; want false, nil", ok, err)
	}
	if err := s.CreateTenant(ctx, "root"); err != nil {
		t.Fatalf("CreateTenant(root) = %v", err)
	}
	wantKind(t, "CreateTenant(root) again", s.CreateTenant(ctx, "root"), errs.AlreadyExists)
	for i := range 2 {
		if err := s.EnsureTenant(ctx, "root"); err != nil {
			t.Fatalf("EnsureTenant(root) #%d = %v", i+1, err)
		}
	}
	if ok, err := s.TenantExists(ctx, "root"); !ok || err != nil {
		t.Errorf("TenantExists(root) = %v, %v; want true, nil", ok, err)
	}
}

func TestAPITokens(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	id, err := s.CreateAPIToken(ctx, "a", "ci", []byte("hash-a"))
	if err != nil {
		t.Fatalf("CreateAPIToken(a) = %v", err)
	}
	tenant, tokenID, err := s.LookupAPIToken(ctx, []byte("hash-a"))
	if tenant != "a" || tokenID != id || err != nil {
		t.Errorf("LookupAPIToken(hash-a) = %q, %q, %v; want a, %s, nil", tenant, tokenID, err, id)
	}
	_, _, err = s.LookupAPIToken(ctx, []byte("hash-unknown"))
	wantKind(t, "LookupAPIToken(unknown)", err, errs.NotFound)

	_, err = s.CreateAPIToken(ctx, "b", "same secret", []byte("hash-a"))
	wantKind(t, "CreateAPIToken(taken hash)", err, errs.AlreadyExists)
	_, err = s.CreateAPIToken(ctx, "nobody", "ci", []byte("hash-n"))
	wantKind(t, "CreateAPIToken(unknown tenant)", err, errs.NotFound)

	wantKind(t, "RevokeAPIToken(other tenant)", s.RevokeAPIToken(ctx, "b", id), errs.NotFound)
	if _, _, err := s.LookupAPIToken(ctx, []byte("hash-a")); err != nil {
		t.Fatalf("LookupAPIToken() after another tenant's revoke = %v", err)
	}
	for i := range 2 {
		if err := s.RevokeAPIToken(ctx, "a", id); err != nil {
			t.Fatalf("RevokeAPIToken(a, %s) #%d = %v", id, i+1, err)
		}
	}
	_, _, err = s.LookupAPIToken(ctx, []byte("hash-a"))
	wantKind(t, "LookupAPIToken(revoked)", err, errs.NotFound)
}

// TestBadTextIsInvalidInput: a value PostgreSQL cannot store (a NUL in text,
// SQLSTATE 22021) is INVALID_INPUT, final, not INTERNAL that a workflow
// would retry for minutes.
func TestBadTextIsInvalidInput(t *testing.T) {
	t.Parallel()
	s := testpg.New(t)
	ctx := t.Context()
	wantKind(t, "CreateTenant(NUL)", s.CreateTenant(ctx, "a\x00b"), errs.InvalidInput)
	_, err := s.TenantExists(ctx, "a\x00b")
	wantKind(t, "TenantExists(NUL)", err, errs.InvalidInput)
	if errs.InvalidInput.Retryable() {
		t.Errorf("INVALID_INPUT.Retryable() = true, want false")
	}
}
