package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
)

// Purposes of a data key.
const (
	PurposeSecrets = "secrets" // seals the secrets table
	PurposeCodec   = "codec"   // encrypts Temporal payloads
)

// Settings rows that held the keys in clear before 0007; the first process
// with the key-encryption key moves them into data_keys and deletes them.
var legacyKeySettings = map[string]string{"secrets-key": PurposeSecrets, "temporal-codec-key": PurposeCodec}

// DataKey is a data key in clear: only a process holding the
// key-encryption key gets one.
type DataKey struct {
	ID       string // codec.KeyID of Key: what a payload or a secret row names
	Purpose  string
	TenantID string // a codec key's tenant; "" the control plane's own
	Version  int64  // the newest version of a purpose and tenant encrypts
	Key      []byte
}

// UseKeyEncryptionKey gives the store the key that wraps every data key
// (serve's key file: it never enters the database) and moves the keys an
// older version kept in clear in the settings table under it, deleting
// them, so that database access alone no longer opens secrets or payloads.
// Without it the store seals and opens nothing.
func (s *Store) UseKeyEncryptionKey(ctx context.Context, kek []byte) error {
	aead, err := newAEAD(kek)
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "key-encryption key")
	}
	s.keysMu.Lock()
	s.kek, s.kekID = aead, codec.KeyID(kek)
	s.keysMu.Unlock()
	return s.moveLegacyKeys(ctx)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != codec.KeySize {
		return nil, fmt.Errorf("a key must be %d bytes, got %d", codec.KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// moveLegacyKeys wraps the clear keys of settings into data_keys, names
// the old shared secrets key on every secret, and deletes the clear rows,
// in one transaction (concurrent starts: the row lock makes one do it).
func (s *Store) moveLegacyKeys(ctx context.Context) error {
	const op = "store.moveLegacyKeys"
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT name, value FROM settings WHERE name = ANY($1) ORDER BY name FOR UPDATE`,
			slices.Collect(maps.Keys(legacyKeySettings)))
		if err != nil {
			return dbError(op, err)
		}
		old := map[string][]byte{}
		for rows.Next() {
			var name string
			var v []byte
			if err := rows.Scan(&name, &v); err != nil {
				rows.Close()
				return dbError(op, err)
			}
			old[name] = v
		}
		if err := rows.Err(); err != nil {
			return dbError(op, err)
		}
		for name, key := range old {
			k := DataKey{ID: codec.KeyID(key), Purpose: legacyKeySettings[name], Key: key}
			if err := s.insertKey(ctx, tx, k, `ON CONFLICT (id) DO NOTHING`); err != nil {
				return err
			}
			if k.Purpose == PurposeSecrets {
				if _, err := tx.Exec(ctx, `UPDATE secrets SET key_id = $1 WHERE key_id IS NULL`, k.ID); err != nil {
					return dbError(op, err)
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM settings WHERE name = $1`, name); err != nil {
				return dbError(op, err)
			}
		}
		return nil
	})
}

// insertKey wraps k under the key-encryption key and inserts it; the
// additional data binds the wrapped key to its id, purpose and tenant.
func (s *Store) insertKey(ctx context.Context, q pgxQuerier, k DataKey, conflict string) error {
	kek, kekID, err := s.keyEncryptionKey()
	if err != nil {
		return err
	}
	nonce := make([]byte, kek.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return errs.Wrap(errs.Internal, err, "cannot read random bytes")
	}
	wrapped := kek.Seal(nonce, nonce, k.Key, wrapAD(k))
	_, err = q.Exec(ctx, `INSERT INTO data_keys (id, purpose, tenant_id, kek_id, wrapped) VALUES ($1, $2, $3, $4, $5) `+conflict,
		k.ID, k.Purpose, nullable(k.TenantID), kekID, wrapped)
	return dbError("store.insertKey", err)
}

type pgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func wrapAD(k DataKey) []byte { return []byte(k.Purpose + "/" + k.TenantID + "/" + k.ID) }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Store) keyEncryptionKey() (cipher.AEAD, string, error) {
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	if s.kek == nil {
		return nil, "", errs.New(errs.InvalidState,
			"this process has no key file: secrets and payload keys are kept wrapped by it, outside the database (give serve --key-file, or the data dir that holds it)")
	}
	return s.kek, s.kekID, nil
}

const keyColumns = `id, version, purpose, coalesce(tenant_id, ''), kek_id, wrapped`

// scanKey reads and unwraps one data_keys row.
func (s *Store) scanKey(row pgx.Row) (DataKey, error) {
	var k DataKey
	var kekID string
	var wrapped []byte
	if err := row.Scan(&k.ID, &k.Version, &k.Purpose, &k.TenantID, &kekID, &wrapped); err != nil {
		return DataKey{}, err
	}
	kek, mine, err := s.keyEncryptionKey()
	if err != nil {
		return DataKey{}, err
	}
	if kekID != mine {
		return DataKey{}, errs.New(errs.InvalidState,
			"data key %s is wrapped by key file %s but this process holds key file %s: start it with the key file of this database", k.ID, kekID, mine)
	}
	ns := kek.NonceSize()
	if len(wrapped) < ns {
		return DataKey{}, errs.New(errs.Internal, "data key %s is damaged", k.ID)
	}
	if k.Key, err = kek.Open(nil, wrapped[:ns], wrapped[ns:], wrapAD(k)); err != nil {
		return DataKey{}, errs.New(errs.Internal, "data key %s does not unwrap with this key file: it was altered", k.ID)
	}
	return k, nil
}

// CurrentKey returns the newest key of purpose (and, for codec keys, of
// tenant; "" is the control plane's own), making the first one when there
// is none. Concurrent first calls agree: the making is serialized.
func (s *Store) CurrentKey(ctx context.Context, purpose, tenant string) (DataKey, error) {
	const op = "store.CurrentKey"
	k, err := s.newestKey(ctx, s.pool, purpose, tenant)
	if err == nil || !isNoRows(err) {
		return k, dbError(op, err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('data_keys/' || $1 || '/' || $2))`, purpose, tenant); err != nil {
			return dbError(op, err)
		}
		if k, err = s.newestKey(ctx, tx, purpose, tenant); !isNoRows(err) {
			return dbError(op, err)
		}
		k, err = s.addKey(ctx, tx, purpose, tenant)
		return err
	})
	return k, err
}

func (s *Store) newestKey(ctx context.Context, q pgxQuerier, purpose, tenant string) (DataKey, error) {
	return s.scanKey(q.QueryRow(ctx, `SELECT `+keyColumns+` FROM data_keys
		WHERE purpose = $1 AND tenant_id IS NOT DISTINCT FROM $2 ORDER BY version DESC LIMIT 1`, purpose, nullable(tenant)))
}

// addKey makes a new key version of purpose and tenant.
func (s *Store) addKey(ctx context.Context, q pgxQuerier, purpose, tenant string) (DataKey, error) {
	key := make([]byte, codec.KeySize)
	if _, err := rand.Read(key); err != nil {
		return DataKey{}, errs.Wrap(errs.Internal, err, "cannot read random bytes")
	}
	k := DataKey{ID: codec.KeyID(key), Purpose: purpose, TenantID: tenant, Key: key}
	if err := s.insertKey(ctx, q, k, ""); err != nil {
		return DataKey{}, err
	}
	return s.scanKey(q.QueryRow(ctx, `SELECT `+keyColumns+` FROM data_keys WHERE id = $1`, k.ID))
}

// Key returns the data key id of purpose.
func (s *Store) Key(ctx context.Context, purpose, id string) (DataKey, error) {
	k, err := s.scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM data_keys WHERE id = $1 AND purpose = $2`, id, purpose))
	if isNoRows(err) {
		return DataKey{}, notFound("key", id).WithOp("store.Key")
	}
	return k, dbError("store.Key", err)
}

// CodecKeys returns every codec key, each tenant's and the control plane's
// own, oldest first: what the control-plane worker decrypts with.
func (s *Store) CodecKeys(ctx context.Context) ([]DataKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM data_keys WHERE purpose = $1 ORDER BY version`, PurposeCodec)
	if err != nil {
		return nil, dbError("store.CodecKeys", err)
	}
	defer rows.Close()
	var out []DataKey
	for rows.Next() {
		k, err := s.scanKey(rows)
		if err != nil {
			return nil, dbError("store.CodecKeys", err)
		}
		out = append(out, k)
	}
	return out, dbError("store.CodecKeys", rows.Err())
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// isKeyGone reports a write that named a data key a rotation retired
// meanwhile (the secrets.key_id foreign key).
func isKeyGone(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// SecretUsedOnSite reports whether a live node of tenantID on site uses ref
// as its BMC credentials: the only secrets a site agent may resolve. The
// node must be of the secret's own tenant (tenantID, as ref names it), so a
// node that names another tenant's secret never opens it.
func (s *Store) SecretUsedOnSite(ctx context.Context, tenantID, ref, siteID string) (bool, error) {
	var used bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM metal_nodes
		WHERE tenant_id = $1 AND (bmc_credentials_ref = $2 OR bmc_pending_ref = $2) AND site_id = $3 AND state <> 'retired')`,
		tenantID, ref, siteID).Scan(&used)
	return used, dbError("store.SecretUsedOnSite", err)
}
