package siteagent

import (
	"context"
	"sync"
	"time"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/errs"
)

// keyFetchEvery bounds how often a payload under a key the agent lacks
// makes it ask the control plane (a renewal) for its tenant's current key.
const keyFetchEvery = 30 * time.Second

// siteKeys is the agent's payload keys: its tenant's current one (from the
// join or the last renewal) and the ones it held before, which still
// decrypt what was sent under them. It is the codec.Source of the worker's
// keyring: a payload under a newer key (a rotation) fetches it.
type siteKeys struct {
	a         *Agent
	mu        sync.Mutex
	lastFetch time.Time
}

func (k *siteKeys) keys() []codec.Key {
	k.a.id.mu.Lock()
	defer k.a.id.mu.Unlock()
	var out []codec.Key
	for _, b := range append(append([][]byte{}, k.a.id.OldCodecKeys...), k.a.id.CodecKey) {
		out = append(out, codec.Key{ID: codec.KeyID(b), Tenant: k.a.id.TenantID, Key: b})
	}
	return out
}

// CurrentKey is the key the agent encrypts with: its tenant's current.
func (k *siteKeys) CurrentKey(_ context.Context, tenant string) (codec.Key, error) {
	ks := k.keys()
	if tenant != k.a.id.TenantID {
		return codec.Key{}, errs.New(errs.PermissionDenied, "a site agent of tenant %s holds no key of tenant %s", k.a.id.TenantID, tenant)
	}
	return ks[len(ks)-1], nil
}

// KeyByID renews (at most every keyFetchEvery) to learn its tenant's
// current key, and returns it if it is key id: another tenant's key is
// never given, so asking cannot reveal one.
func (k *siteKeys) KeyByID(ctx context.Context, id string) (codec.Key, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.lastFetch) >= keyFetchEvery {
		k.lastFetch = time.Now()
		if err := k.a.renew(ctx); err != nil {
			return codec.Key{}, err
		}
	}
	for _, key := range k.keys() {
		if key.ID == id {
			return key, nil
		}
	}
	return codec.Key{}, errs.New(errs.NotFound, "key %s is not this site's tenant's", id)
}

// keepCodecKey makes key the agent's current payload key, keeping the one
// before to decrypt, and saves both in join.json. A renewal that carries no
// key leaves the keys as they are.
func (a *Agent) keepCodecKey(key []byte) error {
	if len(key) == 0 {
		return nil
	}
	if len(key) != codec.KeySize {
		return errs.New(errs.Internal, "the control plane's renewal carries no payload key").WithOp(renewOp)
	}
	a.id.mu.Lock()
	defer a.id.mu.Unlock()
	if codec.KeyID(key) == codec.KeyID(a.id.CodecKey) {
		return nil
	}
	j := a.id.joined
	j.OldCodecKeys = append(append([][]byte{}, j.OldCodecKeys...), j.CodecKey)
	j.CodecKey = key
	if err := saveJoined(a.cfg.DataDir, j); err != nil {
		return err
	}
	a.id.joined = j
	a.log.Info("the site agent has its tenant's new payload key", "site", a.id.SiteID, "key", codec.KeyID(key))
	return nil
}
