package controlplane

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/store"
)

// KeyFile is the key-encryption key's file in the data dir: it wraps the
// secrets and payload keys the database holds, so the database alone opens
// nothing. Every serve over one database needs the same one.
const KeyFile = "master.key"

// useKeyFile gives the store the key-encryption key of cfg.KeyFile
// (creating it, 0600, on the first start; refusing one readable by others)
// and moves any key an older version kept in clear in the database under
// it.
func (cp *ControlPlane) useKeyFile(ctx context.Context) error {
	if cp.cfg.KeyTransit != "" {
		// Not pretended: nothing here has been tried against a transit engine.
		return errs.New(errs.Unsupported, "a Vault/OpenBao transit key-encryption key (--key-transit) is not supported yet: use --key-file")
	}
	kek, err := codec.LoadOrCreateKey(cp.cfg.KeyFile)
	if err != nil {
		return err
	}
	return cp.store.UseKeyEncryptionKey(ctx, kek)
}

// keyring is the control plane's payload keyring: every tenant's codec
// keys and its own, from the store; it learns a rotation's keys as they
// are needed.
func (cp *ControlPlane) keyring(ctx context.Context) (*codec.Keyring, error) {
	src := storeKeys{cp.store}
	// Its own key is made (or the old shared key moved) before the first
	// payload needs one.
	own, err := src.CurrentKey(ctx, "")
	if err != nil {
		return nil, err
	}
	all, err := cp.store.CodecKeys(ctx)
	if err != nil {
		return nil, err
	}
	keys := []codec.Key{own}
	for _, k := range all {
		keys = append(keys, codecKey(k))
	}
	return codec.NewKeyring(src, keys...)
}

// Keyring is the payload keyring the control plane's worker and API use
// (for tests that read history).
func (cp *ControlPlane) Keyring(ctx context.Context) (*codec.Keyring, error) { return cp.keyring(ctx) }

// tenantCodecKey is the key a site agent of tenant gets at join and renewal:
// its tenant's, never another's.
func (cp *ControlPlane) tenantCodecKey(ctx context.Context, tenant string) ([]byte, error) {
	if tenant == "" {
		return nil, errs.New(errs.Internal, "a site agent of no tenant asked for a payload key")
	}
	k, err := cp.store.CurrentKey(ctx, store.PurposeCodec, tenant)
	return k.Key, err
}

// storeKeys is codec.Source over the store.
type storeKeys struct{ s *store.Store }

func (k storeKeys) CurrentKey(ctx context.Context, tenant string) (codec.Key, error) {
	dk, err := k.s.CurrentKey(ctx, store.PurposeCodec, tenant)
	return codecKey(dk), err
}

func (k storeKeys) KeyByID(ctx context.Context, id string) (codec.Key, error) {
	dk, err := k.s.Key(ctx, store.PurposeCodec, id)
	return codecKey(dk), err
}

func codecKey(k store.DataKey) codec.Key { return codec.Key{ID: k.ID, Tenant: k.TenantID, Key: k.Key} }

// RotateKeys is `better-compute keys rotate`: over the database of cfg,
// with its key file, it adds new keys and re-seals every secret while
// serve runs (see store.RotateKeys), and reports what it did to w.
func RotateKeys(ctx context.Context, cfg Config, w io.Writer) error {
	cfg = withDefaults(cfg)
	cp := &ControlPlane{cfg: cfg, log: cfg.Logger}
	defer cp.stopStore()
	if err := cp.openStore(ctx); err != nil {
		return err
	}
	if err := cp.useKeyFile(ctx); err != nil {
		return err
	}
	r, err := cp.store.RotateKeys(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "secrets key %s: %d secrets re-sealed, retired %d old key(s) %v\ncodec keys: new %v (the %d older ones still decrypt history; sites get the new one at renewal)\n",
		r.SecretsKey, r.Resealed, len(r.Retired), r.Retired, r.CodecKeys, r.OldCodecKeys)
	return err
}

func keyFileDefault(cfg Config) string { return filepath.Join(cfg.DataDir, KeyFile) }
