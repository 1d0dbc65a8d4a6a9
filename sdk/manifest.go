package sdk

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Type is a field's type.
type Type string

const (
	String Type = "string"
	Int    Type = "int"
	Bool   Type = "bool"
	// Image is a catalog image id (img_…): the workflow pins the image at
	// the node's site before the step runs.
	Image Type = "image"
)

// Field is one input of a step.
type Field struct {
	Name     string
	Type     Type
	Required bool
	Default  any      // applied when with leaves the field out
	Min, Max *int64   // Int bounds, inclusive
	Enum     []string // String: the values allowed
	Doc      string
	// FromStep: the field may come from the output of the step that
	// with.fromStep names, which must declare it in Outputs.
	FromStep bool
	// Check, when set, checks a value of the right type further; its error
	// is the problem's message.
	Check func(v any) error
}

// Manifest is a step's typed inputs.
type Manifest []Field

// Problem is one thing wrong with a step's with, naming the field.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// FromStepKey is the with key naming the earlier step whose outputs fill
// the fields marked FromStep.
const FromStepKey = "fromStep"

// Resolve checks with against the manifest and returns the values after
// defaults, or the problems, each naming prefix.with.<field>. Fields marked
// FromStep that with leaves out are not required here when with names a
// fromStep; the caller checks that step's outputs.
func (m Manifest) Resolve(prefix string, with map[string]any) (Values, []Problem) {
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{Field: prefix + ".with." + field, Message: fmt.Sprintf(format, args...)})
	}
	vals := Values{}
	from, hasFrom := with[FromStepKey]
	if hasFrom {
		if s, ok := from.(string); !ok || s == "" {
			add(FromStepKey, "fromStep names an earlier step by its id (a string)")
		} else {
			vals[FromStepKey] = s
		}
	}
	for _, k := range sortedKeys(with) {
		if k != FromStepKey && m.field(k) == nil {
			add(k, "takes no input %q (it takes %s)", k, m.names())
		}
	}
	for _, f := range m {
		v, ok := with[f.Name]
		if !ok {
			switch {
			case f.FromStep && hasFrom: // the earlier step's output fills it, not the default
			case f.Default != nil:
				vals[f.Name] = f.Default
			case f.Required:
				add(f.Name, "needs with.%s (%s)", f.Name, f.describe())
			}
			continue
		}
		cv, err := f.convert(v)
		if err != nil {
			add(f.Name, "%v", err)
			continue
		}
		vals[f.Name] = cv
	}
	if len(out) > 0 {
		return nil, out
	}
	return vals, nil
}

func (m Manifest) field(name string) *Field {
	for i := range m {
		if m[i].Name == name {
			return &m[i]
		}
	}
	return nil
}

// Field returns the manifest's field of that name, or nil.
func (m Manifest) Field(name string) *Field { return m.field(name) }

func (m Manifest) names() string {
	if len(m) == 0 {
		return "none"
	}
	var n []string
	for _, f := range m {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

func (f Field) describe() string {
	switch {
	case len(f.Enum) > 0:
		return "one of " + strings.Join(f.Enum, ", ")
	case f.Type == Image:
		return "a catalog image id like img_01k5w…"
	case f.Type == Int:
		return "a whole number" + f.bounds()
	}
	return "a " + string(f.Type)
}

func (f Field) bounds() string {
	switch {
	case f.Min != nil && f.Max != nil:
		return fmt.Sprintf(" from %d to %d", *f.Min, *f.Max)
	case f.Min != nil:
		return fmt.Sprintf(" from %d", *f.Min)
	case f.Max != nil:
		return fmt.Sprintf(" up to %d", *f.Max)
	}
	return ""
}

// convert checks v's type and bounds and returns it in the field's type
// (int64 for Int, whatever number JSON gave).
func (f Field) convert(v any) (any, error) {
	var out any
	switch f.Type {
	case String, Image:
		s, ok := v.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("with.%s must be %s", f.Name, f.describe())
		}
		if len(f.Enum) > 0 && !slices.Contains(f.Enum, s) {
			return nil, fmt.Errorf("with.%s must be one of %s, got %q", f.Name, strings.Join(f.Enum, ", "), s)
		}
		if f.Type == Image && !strings.HasPrefix(s, "img_") {
			return nil, fmt.Errorf("with.%s must be %s, got %q", f.Name, f.describe(), s)
		}
		out = s
	case Int:
		n, ok := toInt(v)
		if !ok {
			return nil, fmt.Errorf("with.%s must be %s, got %v", f.Name, f.describe(), v)
		}
		if (f.Min != nil && n < *f.Min) || (f.Max != nil && n > *f.Max) {
			return nil, fmt.Errorf("with.%s must be %s, got %d", f.Name, f.describe(), n)
		}
		out = n
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("with.%s must be true or false, got %v", f.Name, v)
		}
		out = b
	default:
		return nil, fmt.Errorf("with.%s has type %q, which the SDK does not know", f.Name, f.Type)
	}
	if f.Check != nil {
		if err := f.Check(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// Decode decodes values into out (a struct with json tags) through JSON,
// for a Run that prefers a typed input.
func (v Values) Decode(out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// String returns the field's value as a string ("" when absent).
func (v Values) String(name string) string { s, _ := v[name].(string); return s }

// Int returns the field's value as an int64 (0 when absent).
func (v Values) Int(name string) int64 { n, _ := toInt(v[name]); return n }

// Bool returns the field's value (false when absent).
func (v Values) Bool(name string) bool { b, _ := v[name].(bool); return b }

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Ptr returns a pointer to n, for Field.Min and Field.Max.
func Ptr(n int64) *int64 { return &n }
