package sdk

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDescriptorRoundTrip: a step published as JSON and read back is the
// step without its Run and Checks, its int default an int64 again.
func TestDescriptorRoundTrip(t *testing.T) {
	t.Parallel()
	s := Step{ID: "acme.mount", RunsOn: Site, Relays: []string{"site"}, Sends: []string{"site.httpProxy"}, Timeout: 90 * time.Second, RetrySafe: true,
		Outputs: []string{"url"}, Needs: []Need{NeedsVirtualMedia}, After: []string{"acme.render"}, Doc: "mounts",
		Input: Manifest{
			{Name: "url", Type: String, Required: true, FromStep: true},
			{Name: "port", Type: Int, Default: int64(443), Min: Ptr(1), Max: Ptr(65535), Check: func(any) error { return nil }},
			{Name: "mode", Type: String, Enum: []string{"cd", "usb"}},
		},
		Run: func(_ context.Context, _ *Context, in Values) (Values, error) { return in, nil }}
	b, err := json.Marshal(s.Describe())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDescriptor(b)
	if err != nil {
		t.Fatalf("DecodeDescriptor(%s) = %v", b, err)
	}
	want := s
	want.Run = nil
	want.Input = append(Manifest(nil), s.Input...)
	want.Input[1].Check = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeDescriptor(Describe()) = %+v, want %+v", got, want)
	}
}

// TestDescriptorRefused: a descriptor that would not register is an error
// naming what is wrong.
func TestDescriptorRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ json, want string }{
		{`{"id":"acme.x","runsOn":"site","timeout":"soon"}`, "not a duration"},
		{`{"id":"Acme","runsOn":"site","timeout":"1m"}`, "dotted lowerCamel"},
		{`{"id":"acme.x","runsOn":"moon","timeout":"1m"}`, "runsOn"},
		{`{"id":"acme.x","runsOn":"site","timeout":"1m","input":[{"name":"n","type":"float"}]}`, "string, int, bool or image"},
		{`{"id":"acme.x","runsOn":"site","timeout":"1m","input":[{"name":"n","type":"int","default":1.5}]}`, "default of n"},
		{`{"id":"acme.x","runsOn":"site","timeout":"1m","needs":["gpu"]}`, "unknown need"},
		{`{"id":"acme.x","runsOn":"site","timeout":"1m","check":"x"}`, "does not decode"},
	} {
		if _, err := DecodeDescriptor([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeDescriptor(%s) = %v, want an error saying %q", c.json, err, c.want)
		}
	}
}
