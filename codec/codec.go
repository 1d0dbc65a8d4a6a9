// Package codec owns the encryption of everything better-compute hands to
// Temporal: an AES-256-GCM payload codec (so BMC passwords, tokens and other
// secrets never sit in workflow history in clear), the data converter built on
// it, the key file, and the remote codec HTTP endpoint the Temporal Web UI calls
// to show decrypted payloads to an operator.
//
// It imports only the Temporal SDK and API, never the server.
package codec

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/errs"
)

// Metadata keys and values written on every payload this codec encrypts.
const (
	// MetadataEncoding is the standard Temporal metadata key naming a payload's encoding.
	MetadataEncoding = converter.MetadataEncoding
	// EncodingEncrypted marks a payload encrypted by this codec.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key that encrypted the payload (see KeyID).
	MetadataKeyID = "encryption-key-id"
	// MetadataCipher names the cipher.
	MetadataCipher = "encryption-cipher"
	// CipherAES256GCM is the only cipher this codec writes.
	CipherAES256GCM = "AES256-GCM"
)

// Compression is the gRPC compression of our Temporal clients: none. The
// SDK gzips every request by default (and the server then its answer), but
// what we send is mostly this codec's ciphertext, which gzip cannot shrink:
// at 20 machines the gzip of Temporal's calls was 2.8% of the control
// plane's CPU for next to no bytes saved.
func Compression() client.GrpcCompression { return &client.GrpcCompressionNone{} }

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// Codec is a converter.PayloadCodec that encrypts each payload with
// AES-256-GCM under its tenant's key of a Keyring, and decrypts with
// whichever key of the ring a payload names. The whole original payload
// (metadata and data) is marshalled and sealed, so even its encoding is
// hidden; the key id is bound to the ciphertext as additional data, so a
// payload cannot be relabelled to another key.
type Codec struct {
	ring   *Keyring
	tenant string
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns a codec of one 32-byte key (the control plane's own).
func New(key []byte) (*Codec, error) {
	r, err := NewKeyring(nil, Key{ID: KeyID(key), Key: key})
	if err != nil {
		return nil, err
	}
	return r.Codec(""), nil
}

// KeyID names a key without revealing it: the first 8 bytes of the SHA-256 of
// the key, in hex. It goes in payload metadata so a rotated key can be told
// apart from a wrong one.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// KeyID returns the id of the key the codec encrypts with ("" when it has none).
func (c *Codec) KeyID() string {
	id, _, _ := c.ring.encryptKey(c.tenant)
	return id
}

// Encode encrypts every payload. It does not modify its argument.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	keyID, aead, err := c.ring.encryptKey(c.tenant)
	if err != nil {
		return nil, err
	}
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "cannot marshal payload for encryption")
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "cannot read random nonce")
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:    []byte(keyID),
				MetadataCipher:   []byte(CipherAES256GCM),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(keyID)),
		}
	}
	return out, nil
}

// Decode decrypts the payloads this codec encrypted and passes every other
// payload through unchanged (history written before encryption was turned on
// stays readable). A payload encrypted under another key, or tampered with,
// is an error.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		d, err := c.decrypt(p)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (c *Codec) decrypt(p *commonpb.Payload) (*commonpb.Payload, error) {
	md := p.GetMetadata()
	if got := string(md[MetadataCipher]); got != CipherAES256GCM {
		return nil, errs.New(errs.Unsupported, "payload cipher %q is not supported (want %s)", got, CipherAES256GCM)
	}
	keyID := string(md[MetadataKeyID])
	aead, err := c.ring.decryptKey(keyID)
	if err != nil {
		return nil, err
	}
	data := p.GetData()
	ns := aead.NonceSize()
	if len(data) < ns+aead.Overhead() {
		return nil, errs.New(errs.InvalidInput, "encrypted payload is too short (%d bytes)", len(data))
	}
	plain, err := aead.Open(nil, data[:ns], data[ns:], []byte(keyID))
	if err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "encrypted payload failed authentication: it was altered or the key is wrong")
	}
	var orig commonpb.Payload
	if err := proto.Unmarshal(plain, &orig); err != nil {
		return nil, errs.Wrap(errs.InvalidInput, err, "decrypted payload is not a Temporal payload")
	}
	return &orig, nil
}

// NewDataConverter returns Temporal's default data converter with every
// payload encrypted by key. It panics if key is not 32 bytes: the key comes
// from LoadOrCreateKey, so a wrong length is a programming error.
func NewDataConverter(key []byte) converter.DataConverter {
	c, err := New(key)
	if err != nil {
		panic(err)
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// NewFailureConverter returns a failure converter that moves failure messages
// and stack traces into an encoded payload, so they are encrypted by dc too.
// Set it as client.Options.FailureConverter beside DataConverter.
func NewFailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter:          dc,
		EncodeCommonAttributes: true,
	})
}
