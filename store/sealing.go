package store

import (
	"context"
	"crypto/cipher"
	"crypto/rand"

	"github.com/better-compute/better-compute/errs"
)

// sealed is a secret value sealed under the secrets key keyID.
type sealed struct {
	keyID string
	data  []byte // nonce, then AES-256-GCM ciphertext
}

// sealSecret seals value under the current secrets key, bound to its row by
// sealedFor. The current key is asked of the database each time, so a
// rotation by another process takes effect at the next write.
func (s *Store) sealSecret(ctx context.Context, value, ad []byte) (sealed, error) {
	k, err := s.CurrentKey(ctx, PurposeSecrets, "")
	if err != nil {
		return sealed{}, err
	}
	aead, err := s.secretsAEAD(ctx, k.ID)
	if err != nil {
		return sealed{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return sealed{}, errs.Wrap(errs.Internal, err, "cannot read random bytes")
	}
	return sealed{keyID: k.ID, data: aead.Seal(nonce, nonce, value, ad)}, nil
}

// writeSealed seals value and hands it to write; when a rotation retired
// the key between the two (the row's foreign key refuses it), it seals
// again under the new one, once.
func (s *Store) writeSealed(ctx context.Context, value, ad []byte, write func(sealed) error) error {
	for try := 0; ; try++ {
		v, err := s.sealSecret(ctx, value, ad)
		if err != nil {
			return err
		}
		if err = write(v); err == nil || try == 1 || !isKeyGone(err) {
			return err
		}
	}
}

// openSealed opens a secret row's value; key names the secret in errors.
func (s *Store) openSealed(ctx context.Context, key string, v sealed, ad []byte) ([]byte, error) {
	if v.keyID == "" {
		return nil, errs.New(errs.InvalidState, "secret %s is sealed with the old shared key: start serve with its key file once to move that key out of the database", key)
	}
	aead, err := s.secretsAEAD(ctx, v.keyID)
	if err != nil {
		return nil, err
	}
	ns := aead.NonceSize()
	if len(v.data) < ns {
		return nil, errs.New(errs.Internal, "secret %s is damaged", key)
	}
	out, err := aead.Open(nil, v.data[:ns], v.data[ns:], ad)
	if err != nil {
		return nil, errs.New(errs.Internal, "secret %s does not open with its key %s: it was altered or copied from another row", key, v.keyID)
	}
	return out, nil
}

// secretsAEAD returns the cipher of secrets key id, unwrapped once.
func (s *Store) secretsAEAD(ctx context.Context, id string) (cipher.AEAD, error) {
	s.keysMu.Lock()
	aead := s.aeads[id]
	s.keysMu.Unlock()
	if aead != nil {
		return aead, nil
	}
	k, err := s.Key(ctx, PurposeSecrets, id)
	if err != nil {
		return nil, err
	}
	if aead, err = newAEAD(k.Key); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "secrets key %s", id)
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	if s.aeads == nil {
		s.aeads = map[string]cipher.AEAD{}
	}
	s.aeads[id] = aead
	return aead, nil
}
