package webui

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/codec"
)

// TestCodecEndpoint: the codec endpoint on the UI's origin needs a session
// and decodes a payload only for its tenant (and operators); encoding is a
// write action.
func TestCodecEndpoint(t *testing.T) {
	t.Parallel()
	const plain = `"tb's BMC password"`
	keyB := make([]byte, codec.KeySize)
	if _, err := rand.Read(keyB); err != nil {
		t.Fatal(err)
	}
	cb, err := codec.New(keyB)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cb.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(plain)}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	if err != nil {
		t.Fatal(err)
	}
	u := startUI(t, Config{WriteActions: true, PayloadTenant: codec.KeyTenants(map[string]string{codec.KeyID(keyB): "tb"})},
		false, converter.NewPayloadCodecHTTPHandler(cb))
	post := func(c *http.Client, op string) (int, string) {
		t.Helper()
		resp, err := c.Post(u.url+CodecPath+"/"+op, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, token, op string
		want            int
	}{
		{"no session", "", "decode", http.StatusUnauthorized},
		{"tenant ta, tb's payload", taToken, "decode", http.StatusForbidden},
		{"tenant tb, its own payload", tbToken, "decode", http.StatusOK},
		{"root, any tenant's payload", rootToken, "decode", http.StatusOK},
		{"tenant tb encodes", tbToken, "encode", http.StatusForbidden},
		{"root encodes, write actions on", rootToken, "encode", http.StatusOK},
	} {
		c := client(t)
		if tc.token != "" {
			u.login(t, c, tc.token)
		}
		code, got := post(c, tc.op)
		if code != tc.want {
			t.Errorf("%s: POST %s/%s = %d %.100s, want %d", tc.name, CodecPath, tc.op, code, got, tc.want)
		}
		if leaked := strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(plain))); leaked != (tc.want == http.StatusOK && tc.op == "decode") {
			t.Errorf("%s: POST %s/%s answer holds the plaintext: %v", tc.name, CodecPath, tc.op, leaked)
		}
	}
}
