package sdk

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testManifest = Manifest{
	{Name: "image", Type: Image, Required: true},
	{Name: "format", Type: String, Default: "raw", Enum: []string{"raw"}},
	{Name: "port", Type: Int, Min: Ptr(1), Max: Ptr(65535)},
	{Name: "persistent", Type: Bool, Default: false},
	{Name: "url", Type: String, Required: true, FromStep: true},
	{Name: "label", Type: String, Default: "none", FromStep: true},
	{Name: "action", Type: String, Check: func(v any) error {
		if v != "on" {
			return errors.New("with.action must be on")
		}
		return nil
	}},
}

func TestManifestResolve(t *testing.T) {
	cases := []struct {
		name  string
		with  map[string]any
		want  Values
		probs []string // fields of the problems
	}{
		{"defaults", map[string]any{"image": "img_1", "url": "http://x/a.iso"},
			Values{"image": "img_1", "format": "raw", "persistent": false, "url": "http://x/a.iso", "label": "none"}, nil},
		{"a JSON number is an int64", map[string]any{"image": "img_1", "url": "u", "port": float64(8080)},
			Values{"image": "img_1", "format": "raw", "persistent": false, "url": "u", "port": int64(8080), "label": "none"}, nil},
		{"missing required", map[string]any{}, nil, []string{"s.with.image", "s.with.url"}},
		{"wrong types", map[string]any{"image": 3, "url": "u", "persistent": "yes", "port": 1.5}, nil,
			[]string{"s.with.image", "s.with.port", "s.with.persistent"}},
		{"not an image id", map[string]any{"image": "ubuntu", "url": "u"}, nil, []string{"s.with.image"}},
		{"below bounds", map[string]any{"image": "img_1", "url": "u", "port": 0}, nil, []string{"s.with.port"}},
		{"above bounds", map[string]any{"image": "img_1", "url": "u", "port": int64(65536)}, nil, []string{"s.with.port"}},
		{"not in enum", map[string]any{"image": "img_1", "url": "u", "format": "qcow2"}, nil, []string{"s.with.format"}},
		{"check refuses", map[string]any{"image": "img_1", "url": "u", "action": "off"}, nil, []string{"s.with.action"}},
		{"unknown input", map[string]any{"image": "img_1", "url": "u", "colour": "red"}, nil, []string{"s.with.colour"}},
		// fromStep fills url: not required, and a FromStep field takes no default.
		{"fromStep fills", map[string]any{"image": "img_1", "fromStep": "a.render"},
			Values{"image": "img_1", "format": "raw", "persistent": false, "fromStep": "a.render"}, nil},
		{"fromStep not a string", map[string]any{"image": "img_1", "fromStep": 1}, nil, []string{"s.with.fromStep"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, probs := testManifest.Resolve("s", tc.with)
			var fields []string
			for _, p := range probs {
				fields = append(fields, p.Field)
			}
			if diff := cmp.Diff(tc.probs, fields); diff != "" {
				t.Errorf("Resolve(%v) problems (-want +got):\n%s\n%v", tc.with, diff, probs)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Resolve(%v) values (-want +got):\n%s", tc.with, diff)
			}
		})
	}
}

func TestManifestResolveMessagesNameTheField(t *testing.T) {
	_, probs := testManifest.Resolve("steps[2]", map[string]any{"url": "u", "port": 70000})
	want := []Problem{
		{"steps[2].with.image", "needs with.image (a catalog image id like img_01k5w…)"},
		{"steps[2].with.port", "with.port must be a whole number from 1 to 65535, got 70000"},
	}
	if diff := cmp.Diff(want, probs); diff != "" {
		t.Errorf("Resolve problems (-want +got):\n%s", diff)
	}
}

func TestValuesAccessors(t *testing.T) {
	v := Values{"s": "x", "n": float64(3), "b": true}
	if v.String("s") != "x" || v.Int("n") != 3 || !v.Bool("b") || v.String("none") != "" || v.Int("s") != 0 {
		t.Errorf("accessors of %v = %q %d %v", v, v.String("s"), v.Int("n"), v.Bool("b"))
	}
	var out struct {
		S string `json:"s"`
		N int    `json:"n"`
	}
	if err := v.Decode(&out); err != nil || out.S != "x" || out.N != 3 {
		t.Errorf("Decode = %+v, %v", out, err)
	}
}
