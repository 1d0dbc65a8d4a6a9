package codec

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/better-compute/better-compute/errs"
)

const uiOrigin = "http://127.0.0.1:8233"

func TestHTTPHandlerDecodes(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	srv := httptest.NewServer(http.StripPrefix("/codec", HTTPHandler(key, uiOrigin)))
	t.Cleanup(srv.Close)

	secret := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"hunter2"`)}
	enc, err := newCodec(t, key).Encode([]*commonpb.Payload{secret})
	if err != nil {
		t.Fatal(err)
	}
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/codec/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	req.Header.Set("Origin", uiOrigin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /codec/decode = %d %s, want 200", resp.StatusCode, raw)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != uiOrigin {
		t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, uiOrigin)
	}
	var out commonpb.Payloads
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode response %s: %v", raw, err)
	}
	if diff := cmp.Diff([]*commonpb.Payload{secret}, out.Payloads, protocmp.Transform()); diff != "" {
		t.Errorf("POST /codec/decode mismatch (-want +got):\n%s", diff)
	}
}

func TestHTTPHandlerCORS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(HTTPHandler(newKey(t), uiOrigin+"/", "*"))
	t.Cleanup(srv.Close)
	tests := []struct {
		name       string
		origin     string
		wantStatus int
		wantAllow  string
	}{
		{"ui origin", uiOrigin, http.StatusNoContent, uiOrigin},
		{"other origin", "http://evil.example", http.StatusForbidden, ""},
		{"no origin", "", http.StatusForbidden, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			req.Header.Set("Access-Control-Request-Method", "POST")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("OPTIONS from %q = %d, want %d", tt.origin, resp.StatusCode, tt.wantStatus)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tt.wantAllow {
				t.Errorf("OPTIONS from %q Allow-Origin = %q, want %q", tt.origin, got, tt.wantAllow)
			}
		})
	}
}

// keySource is a Source holding keys by id, like the control plane's store.
type keySource map[string]Key

func (s keySource) CurrentKey(_ context.Context, tenant string) (Key, error) {
	for _, k := range s {
		if k.Tenant == tenant {
			return k, nil
		}
	}
	return Key{}, errs.New(errs.NotFound, "no key of tenant %q", tenant)
}

func (s keySource) KeyByID(_ context.Context, id string) (Key, error) {
	if k, ok := s[id]; ok {
		return k, nil
	}
	return Key{}, errs.New(errs.NotFound, "no key %s", id)
}

// TestKeyringPayloadTenant: the codec endpoint learns a payload's tenant
// from its key, including a key made after the ring (a new tenant's).
func TestKeyringPayloadTenant(t *testing.T) {
	t.Parallel()
	own, tb := newKey(t), newKey(t)
	src := keySource{KeyID(tb): {ID: KeyID(tb), Tenant: "tb", Key: tb}, KeyID(own): {ID: KeyID(own), Key: own}}
	ring, err := NewKeyring(src, Key{ID: KeyID(own), Key: own})
	if err != nil {
		t.Fatal(err)
	}
	plain := []*commonpb.Payload{{Data: []byte(`"x"`)}}
	// A site of tb encrypted it; this ring has not met tb's key yet.
	fromTB, err := newCodec(t, tb).Encode(plain)
	if err != nil {
		t.Fatal(err)
	}
	fromOwn, err := ring.Codec("").Encode(plain)
	if err != nil {
		t.Fatal(err)
	}
	stranger := &commonpb.Payload{Metadata: map[string][]byte{MetadataKeyID: []byte("0123456789abcdef")}}
	for _, tc := range []struct {
		name string
		p    *commonpb.Payload
		want string
	}{
		{"tenant tb's key, learnt from the source", fromTB[0], "tb"},
		{"the control plane's own key", fromOwn[0], ""},
		{"a key no one holds", stranger, ""},
	} {
		if got := ring.PayloadTenant(tc.p); got != tc.want {
			t.Errorf("PayloadTenant(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
