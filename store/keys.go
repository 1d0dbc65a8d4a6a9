package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
)

// Settings shared by every control plane process.
const (
	codecKeySetting   = "temporal-codec-key"
	secretsKeySetting = "secrets-key"
)

// CodecKey returns the key of the payload codec that encrypts what Temporal
// stores, created by the first process that asks. It lives here so every
// control plane process over this database shares it; it protects Temporal's
// store, not this one.
func (s *Store) CodecKey(ctx context.Context) ([]byte, error) { return s.setting(ctx, codecKeySetting) }

func (s *Store) setting(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
		name, fresh); err != nil {
		return nil, dbError("store.setting", err)
	}
	// A separate statement sees the winner of concurrent first inserts.
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, name).Scan(&v)
	return v, dbError("store.setting", err)
}

// CreateSecret seals value (AES-256-GCM) and returns its id; the reference
// is secret://<tenant>/<id>.
func (s *Store) CreateSecret(ctx context.Context, tenantID string, value []byte) (string, error) {
	aead, err := s.secretsAEAD(ctx)
	if err != nil {
		return "", err
	}
	id := ids.New("sec")
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := aead.Seal(nonce, nonce, value, []byte(tenantID+"/"+id))
	_, err = s.pool.Exec(ctx, `INSERT INTO secrets (id, tenant_id, sealed) VALUES ($1, $2, $3)`, id, tenantID, sealed)
	return id, dbError("store.CreateSecret", err)
}

// OpenSecret returns the tenant's secret in clear; key is its id or, for a
// named secret, its name.
func (s *Store) OpenSecret(ctx context.Context, tenantID, key string) ([]byte, error) {
	aead, err := s.secretsAEAD(ctx)
	if err != nil {
		return nil, err
	}
	var id string
	var name *string
	var sealed []byte
	err = s.pool.QueryRow(ctx, `SELECT id, name, sealed FROM secrets WHERE tenant_id = $1 AND (id = $2 OR name = $2)`,
		tenantID, key).Scan(&id, &name, &sealed)
	if err != nil {
		if isNoRows(err) {
			return nil, notFound("secret", key).WithOp("store.OpenSecret")
		}
		return nil, dbError("store.OpenSecret", err)
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errs.New(errs.Internal, "secret %s is damaged", key)
	}
	v, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], sealedFor(tenantID, id, name))
	if err != nil {
		return nil, errs.New(errs.Internal, "secret %s does not open with this database's key", key)
	}
	return v, nil
}

func (s *Store) secretsAEAD(ctx context.Context) (cipher.AEAD, error) {
	s.secretsMu.Lock()
	defer s.secretsMu.Unlock()
	if s.secrets != nil {
		return s.secrets, nil
	}
	key, err := s.setting(ctx, secretsKeySetting)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if s.secrets, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return s.secrets, nil
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// SecretUsedOnSite reports whether a live node of tenantID on site uses ref
// as its BMC credentials: the only secrets a site agent may resolve. The
// node must be of the secret's own tenant (tenantID, as ref names it), so a
// node that names another tenant's secret never opens it.
func (s *Store) SecretUsedOnSite(ctx context.Context, tenantID, ref, siteID string) (bool, error) {
	var used bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM metal_nodes
		WHERE tenant_id = $1 AND bmc_credentials_ref = $2 AND site_id = $3 AND state <> 'retired')`,
		tenantID, ref, siteID).Scan(&used)
	return used, dbError("store.SecretUsedOnSite", err)
}
