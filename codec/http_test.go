package codec

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
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
