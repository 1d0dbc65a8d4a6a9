package store_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"testing"

	"github.com/jackc/pgx/v5"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/store"
)

// keyedStore returns a migrated store on a fresh database holding kek, the
// database's URL and tenants "a" and "b".
func keyedStore(t *testing.T, kek []byte) (*store.Store, string) {
	t.Helper()
	url := testpg.NewDatabase(t)
	s := testpg.Open(t, url)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	if kek != nil {
		if err := s.UseKeyEncryptionKey(t.Context(), kek); err != nil {
			t.Fatalf("UseKeyEncryptionKey() = %v", err)
		}
	}
	for _, id := range []string{"a", "b"} {
		if err := s.EnsureTenant(t.Context(), id); err != nil {
			t.Fatalf("EnsureTenant(%q) = %v", id, err)
		}
	}
	return s, url
}

// TestDatabaseAloneOpensNoSecret: with the database and without the key
// file (or with another one) no secret opens, and the database holds no key
// in clear.
func TestDatabaseAloneOpensNoSecret(t *testing.T) {
	t.Parallel()
	kek := testpg.NewKey()
	s, url := keyedStore(t, kek)
	ctx := t.Context()
	if _, _, err := s.PutSecret(ctx, "a", "bmc", []byte(`{"password":"hunter2"}`)); err != nil {
		t.Fatalf("PutSecret() = %v", err)
	}
	if _, err := s.CurrentKey(ctx, store.PurposeCodec, "a"); err != nil {
		t.Fatalf("CurrentKey(codec, a) = %v", err)
	}
	dbOnly := testpg.Open(t, url)
	if v, err := dbOnly.OpenSecret(ctx, "a", "bmc"); err == nil {
		t.Errorf("OpenSecret(without key file) = %q, want an error", v)
	}
	if ks, err := dbOnly.CodecKeys(ctx); err == nil {
		t.Errorf("CodecKeys(without key file) = %d keys, want an error", len(ks))
	}
	other := testpg.Open(t, url)
	if err := other.UseKeyEncryptionKey(ctx, testpg.NewKey()); err != nil {
		t.Fatalf("UseKeyEncryptionKey(other) = %v", err)
	}
	if v, err := other.OpenSecret(ctx, "a", "bmc"); !errs.Is(err, errs.InvalidState) {
		t.Errorf("OpenSecret(another key file) = %q, %v; want INVALID_STATE", v, err)
	}
	// Every key the database holds opens nothing as a secrets key.
	for _, k := range rawColumn(t, url, `SELECT wrapped FROM data_keys UNION ALL SELECT value FROM settings`) {
		if opens(t, url, k) {
			t.Errorf("the database holds a key that opens a secret")
		}
	}
	if v, err := s.OpenSecret(ctx, "a", "bmc"); err != nil || !bytes.Contains(v, []byte("hunter2")) {
		t.Errorf("OpenSecret(with key file) = %q, %v; want the value", v, err)
	}
}

// TestLegacyKeyMovesOut: a database where the secrets key sat in clear in
// settings (before 0007) keeps its secrets, and loses the clear key, when a
// process with the key file starts.
func TestLegacyKeyMovesOut(t *testing.T) {
	t.Parallel()
	s, url := keyedStore(t, nil)
	ctx := t.Context()
	key := testpg.NewKey()
	exec(t, url, `INSERT INTO settings (name, value) VALUES ('secrets-key', $1), ('temporal-codec-key', $2)`, key, testpg.NewKey())
	exec(t, url, `INSERT INTO secrets (id, tenant_id, sealed) VALUES ('sec_old', 'a', $1)`, sealOld(t, key, []byte("old-value"), "a/sec_old"))
	if err := s.UseKeyEncryptionKey(ctx, testpg.NewKey()); err != nil {
		t.Fatalf("UseKeyEncryptionKey() = %v", err)
	}
	if got := rawColumn(t, url, `SELECT value FROM settings`); len(got) != 0 {
		t.Errorf("settings after the move = %d rows, want none (no key in clear)", len(got))
	}
	if v, err := s.OpenSecret(ctx, "a", "sec_old"); err != nil || string(v) != "old-value" {
		t.Errorf("OpenSecret(old secret) = %q, %v; want old-value", v, err)
	}
	ks, err := s.CodecKeys(ctx)
	if err != nil || len(ks) != 1 || ks[0].TenantID != "" {
		t.Errorf("CodecKeys() = %+v, %v; want the old shared key as the control plane's", ks, err)
	}
}

// TestRotateKeys: rotation re-seals every secret under a new key, they all
// still open, the old key is gone from the database, and codec keys get a
// new version while the old ones stay.
func TestRotateKeys(t *testing.T) {
	t.Parallel()
	s, url := keyedStore(t, testpg.NewKey())
	ctx := t.Context()
	want := map[string]string{}
	for i, name := range []string{"one", "two", "three"} {
		if _, _, err := s.PutSecret(ctx, "a", name, []byte(name)); err != nil {
			t.Fatalf("PutSecret(%s) = %v", name, err)
		}
		id, err := s.CreateSecret(ctx, "b", []byte{byte(i)})
		if err != nil {
			t.Fatalf("CreateSecret() = %v", err)
		}
		want["a/"+name], want["b/"+id] = name, string([]byte{byte(i)})
	}
	oldSecrets, _ := s.CurrentKey(ctx, store.PurposeSecrets, "")
	oldCodec, _ := s.CurrentKey(ctx, store.PurposeCodec, "a")
	r, err := s.RotateKeys(ctx)
	if err != nil {
		t.Fatalf("RotateKeys() = %v", err)
	}
	if r.Resealed != 6 || len(r.Retired) != 1 || r.Retired[0] != oldSecrets.ID || len(r.CodecKeys) != 1 {
		t.Errorf("RotateKeys() = %+v, want 6 resealed, %s retired, one new codec key", r, oldSecrets.ID)
	}
	for ref, v := range want {
		tenant, key := ref[:1], ref[2:]
		if got, err := s.OpenSecret(ctx, tenant, key); err != nil || string(got) != v {
			t.Errorf("OpenSecret(%s) after rotation = %q, %v; want %q", ref, got, err, v)
		}
	}
	if ids := rawColumn(t, url, `SELECT key_id::bytea FROM secrets WHERE key_id IS DISTINCT FROM $1`, r.SecretsKey); len(ids) != 0 {
		t.Errorf("secrets not under the new key after rotation: %d", len(ids))
	}
	if _, err := s.Key(ctx, store.PurposeSecrets, oldSecrets.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("Key(old secrets key) after rotation = %v, want NOT_FOUND (retired)", err)
	}
	if k, err := s.Key(ctx, store.PurposeCodec, oldCodec.ID); err != nil || !bytes.Equal(k.Key, oldCodec.Key) {
		t.Errorf("Key(old codec key) after rotation = %v; want it kept for history", err)
	}
	if k, _ := s.CurrentKey(ctx, store.PurposeCodec, "a"); k.ID != r.CodecKeys[0] {
		t.Errorf("CurrentKey(codec, a) after rotation = %s, want %s", k.ID, r.CodecKeys[0])
	}
	if _, _, err := s.PutSecret(ctx, "a", "four", []byte("4")); err != nil {
		t.Errorf("PutSecret after rotation = %v", err)
	}
}

// opens reports whether key, used as a secrets key, opens any secret row.
func opens(t *testing.T, url string, key []byte) bool {
	t.Helper()
	if len(key) != codec.KeySize {
		return false
	}
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, _ := conn.Query(t.Context(), `SELECT tenant_id || '/' || coalesce(name, id), sealed FROM secrets`)
	ads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (bool, error) {
		var ad string
		var v []byte
		if err := r.Scan(&ad, &v); err != nil {
			return false, err
		}
		_, err := aead.Open(nil, v[:aead.NonceSize()], v[aead.NonceSize():], []byte(ad))
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range ads {
		if ok {
			return true
		}
	}
	return false
}

func sealOld(t *testing.T, key, value []byte, ad string) []byte {
	t.Helper()
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, value, []byte(ad))
}

func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s = %v", sql, err)
	}
}

func rawColumn(t *testing.T, url, sql string, args ...any) [][]byte {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, _ := conn.Query(t.Context(), sql, args...)
	out, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatalf("%s = %v", sql, err)
	}
	return out
}

// TestSiteDecodesOnlyItsTenant: a payload of tenant a's workflow, encrypted
// by the control plane's keyring, decodes with tenant a's site key and not
// with tenant b's; a payload under the one key every site had before still
// decodes; and after a rotation the old payloads still decode.
func TestSiteDecodesOnlyItsTenant(t *testing.T) {
	t.Parallel()
	s, url := keyedStore(t, nil)
	ctx := t.Context()
	shared := testpg.NewKey() // the single key of before 0007
	exec(t, url, `INSERT INTO settings (name, value) VALUES ('temporal-codec-key', $1)`, shared)
	if err := s.UseKeyEncryptionKey(ctx, testpg.NewKey()); err != nil {
		t.Fatal(err)
	}
	siteKey := func(tenant string) codec.Key { // what a site of tenant gets at join
		k, err := s.CurrentKey(ctx, store.PurposeCodec, tenant)
		if err != nil {
			t.Fatalf("CurrentKey(codec, %s) = %v", tenant, err)
		}
		return codec.Key{ID: k.ID, Tenant: tenant, Key: k.Key}
	}
	a1, b := siteKey("a"), siteKey("b")
	old := codec.Key{ID: codec.KeyID(shared), Key: shared}
	inFlight := payloadOf(t, ring(t, old), "", "in flight")
	ofA := payloadOf(t, controlPlaneRing(t, s), "a", "tenant a's")
	if got := string(ofA.Metadata[codec.MetadataKeyID]); got != a1.ID {
		t.Errorf("payload of a has key id %s, want a's %s", got, a1.ID)
	}
	if v, err := decode(ring(t, old, b), ofA); err == nil {
		t.Errorf("site of b decoded a's payload: %q", v)
	}
	for name, p := range map[string]*commonpb.Payload{"a's": ofA, "in flight": inFlight} {
		if _, err := decode(ring(t, old, a1), p); err != nil {
			t.Errorf("site of a decode(%s) = %v", name, err)
		}
	}
	if _, err := s.RotateKeys(ctx); err != nil {
		t.Fatal(err)
	}
	a2 := siteKey("a")
	cp := controlPlaneRing(t, s)
	if p := payloadOf(t, cp, "a", "new"); string(p.Metadata[codec.MetadataKeyID]) != a2.ID || a2.ID == a1.ID {
		t.Errorf("payload of a after rotation has key id %s, want the new %s", p.Metadata[codec.MetadataKeyID], a2.ID)
	}
	for name, p := range map[string]*commonpb.Payload{"a's": ofA, "in flight": inFlight} {
		if v, err := decode(cp, p); err != nil || v != map[string]string{"a's": "tenant a's", "in flight": "in flight"}[name] {
			t.Errorf("control plane decode(%s) after rotation = %q, %v", name, v, err)
		}
		if _, err := decode(ring(t, old, a1, a2), p); err != nil {
			t.Errorf("site of a decode(%s) after rotation = %v", name, err)
		}
	}
}

func ring(t *testing.T, keys ...codec.Key) *codec.Keyring {
	t.Helper()
	r, err := codec.NewKeyring(nil, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// controlPlaneRing holds every codec key, as serve's worker does.
func controlPlaneRing(t *testing.T, s *store.Store) *codec.Keyring {
	t.Helper()
	all, err := s.CodecKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var keys []codec.Key
	for _, k := range all {
		keys = append(keys, codec.Key{ID: k.ID, Tenant: k.TenantID, Key: k.Key})
	}
	return ring(t, keys...)
}

// payloadOf encodes v as a call of tenant's would (codec.WithTenant).
func payloadOf(t *testing.T, r *codec.Keyring, tenant, v string) *commonpb.Payload {
	t.Helper()
	dc := r.DataConverter("")
	if tenant != "" {
		dc = dc.(workflow.ContextAware).WithContext(codec.WithTenant(t.Context(), tenant))
	}
	p, err := dc.ToPayload(v)
	if err != nil {
		t.Fatalf("ToPayload(%s) = %v", tenant, err)
	}
	return p
}

func decode(r *codec.Keyring, p *commonpb.Payload) (string, error) {
	var v string
	err := r.DataConverter("").FromPayload(p, &v)
	return v, err
}
