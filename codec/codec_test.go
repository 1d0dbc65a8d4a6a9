package codec

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/better-compute/better-compute/errs"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func newCodec(t *testing.T, key []byte) *Codec {
	t.Helper()
	c, err := New(key)
	if err != nil {
		t.Fatalf("New(key) = %v", err)
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	c := newCodec(t, newKey(t))
	tests := []struct {
		name string
		in   *commonpb.Payload
	}{
		{"json secret", &commonpb.Payload{
			Metadata: map[string][]byte{"encoding": []byte("json/plain")},
			Data:     []byte(`{"password":"hunter2"}`),
		}},
		{"nil data", &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/null")}}},
		{"empty", &commonpb.Payload{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := c.Encode([]*commonpb.Payload{tt.in})
			if err != nil {
				t.Fatalf("Encode = %v", err)
			}
			if got := string(enc[0].Metadata[MetadataEncoding]); got != EncodingEncrypted {
				t.Errorf("Encode encoding = %q, want %q", got, EncodingEncrypted)
			}
			if got := string(enc[0].Metadata[MetadataKeyID]); got != c.KeyID() {
				t.Errorf("Encode key id = %q, want %q", got, c.KeyID())
			}
			if len(tt.in.Data) > 0 && bytes.Contains(enc[0].Data, tt.in.Data) {
				t.Errorf("Encode data holds the plaintext %q", tt.in.Data)
			}
			dec, err := c.Decode(enc)
			if err != nil {
				t.Fatalf("Decode = %v", err)
			}
			if diff := cmp.Diff(tt.in, dec[0], protocmp.Transform()); diff != "" {
				t.Errorf("Decode(Encode(p)) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeUsesFreshNonce(t *testing.T) {
	t.Parallel()
	c := newCodec(t, newKey(t))
	p := &commonpb.Payload{Data: []byte("same")}
	a, err := c.Encode([]*commonpb.Payload{p, p})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[0].Data, a[1].Data) {
		t.Errorf("Encode(p, p) gave equal ciphertexts: nonce reused")
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	c := newCodec(t, key)
	enc, err := c.Encode([]*commonpb.Payload{{Data: []byte(`"secret"`)}})
	if err != nil {
		t.Fatal(err)
	}
	good := enc[0]
	tests := []struct {
		name   string
		codec  *Codec
		mutate func(p *commonpb.Payload)
		want   errs.Kind
	}{
		{"flipped ciphertext bit", c, func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 1 }, errs.InvalidInput},
		{"flipped nonce bit", c, func(p *commonpb.Payload) { p.Data[0] ^= 1 }, errs.InvalidInput},
		{"truncated", c, func(p *commonpb.Payload) { p.Data = p.Data[:5] }, errs.InvalidInput},
		{"relabelled key id", c, func(p *commonpb.Payload) { p.Metadata[MetadataKeyID] = []byte("0000000000000000") }, errs.InvalidInput},
		{"other key", newCodec(t, newKey(t)), func(*commonpb.Payload) {}, errs.InvalidInput},
		{"unknown cipher", c, func(p *commonpb.Payload) { p.Metadata[MetadataCipher] = []byte("ROT13") }, errs.Unsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := cloneP(good)
			tt.mutate(p)
			_, err := tt.codec.Decode([]*commonpb.Payload{p})
			if got := errs.KindOf(err); got != tt.want {
				t.Errorf("Decode(%s) error kind = %q (%v), want %q", tt.name, got, err, tt.want)
			}
		})
	}
}

func cloneP(p *commonpb.Payload) *commonpb.Payload {
	md := make(map[string][]byte, len(p.Metadata))
	for k, v := range p.Metadata {
		md[k] = bytes.Clone(v)
	}
	return &commonpb.Payload{Metadata: md, Data: bytes.Clone(p.Data)}
}

func TestDecodePassesForeignPayloads(t *testing.T) {
	t.Parallel()
	c := newCodec(t, newKey(t))
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"a": "b"})
	if err != nil {
		t.Fatal(err)
	}
	zlib, err := converter.NewZlibCodec(converter.ZlibCodecOptions{AlwaysEncode: true}).Encode([]*commonpb.Payload{plain})
	if err != nil {
		t.Fatal(err)
	}
	in := []*commonpb.Payload{plain, zlib[0], {}}
	got, err := c.Decode(in)
	if err != nil {
		t.Fatalf("Decode(foreign) = %v", err)
	}
	for i := range in {
		if got[i] != in[i] {
			t.Errorf("Decode(foreign)[%d] = %v, want the same payload unchanged %v", i, got[i], in[i])
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := New(make([]byte, n)); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("New(%d bytes) = %v, want INVALID_INPUT", n, err)
		}
	}
}

func TestDataConverterEncrypts(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	dc := NewDataConverter(key)
	p, err := dc.ToPayload(struct{ Password string }{"hunter2"})
	if err != nil {
		t.Fatalf("ToPayload = %v", err)
	}
	if bytes.Contains(p.Data, []byte("hunter2")) || string(p.Metadata[MetadataEncoding]) != EncodingEncrypted {
		t.Errorf("ToPayload = %v, want an encrypted payload", p)
	}
	var out struct{ Password string }
	if err := dc.FromPayload(p, &out); err != nil || out.Password != "hunter2" {
		t.Errorf("FromPayload = %+v, %v, want {hunter2}, nil", out, err)
	}
	other := NewDataConverter(newKey(t))
	if err := other.FromPayload(p, &out); err == nil {
		t.Errorf("FromPayload with another key = nil error, want one")
	}
}

func TestFailureConverterEncryptsMessage(t *testing.T) {
	t.Parallel()
	dc := NewDataConverter(newKey(t))
	fc := NewFailureConverter(dc)
	f := fc.ErrorToFailure(errs.New(errs.DriverError, "BMC said password hunter2 is wrong"))
	if bytes.Contains([]byte(f.GetMessage()), []byte("hunter2")) {
		t.Errorf("ErrorToFailure message = %q, want it moved into an encrypted payload", f.GetMessage())
	}
	back := fc.FailureToError(f)
	if !bytes.Contains([]byte(back.Error()), []byte("hunter2")) {
		t.Errorf("FailureToError(ErrorToFailure(err)) = %q, want the original message", back.Error())
	}
}
