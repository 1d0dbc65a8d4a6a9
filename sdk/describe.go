package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Descriptor is a step as a worker publishes it: everything a profile is
// resolved against (where it runs, its timeout, needs, order, outputs and
// input manifest), without its Run or its fields' Check. bcd site
// announces the steps it serves and the control-plane worker publishes its
// own, so the API resolves profiles against what really runs, including
// plugin steps the API itself was not built with.
type Descriptor struct {
	ID        string            `json:"id"`
	RunsOn    RunsOn            `json:"runsOn"`
	Relays    []string          `json:"relays,omitempty"`
	Sends     []string          `json:"sends,omitempty"`
	Timeout   string            `json:"timeout"` // a Go duration: 2m0s
	RetrySafe bool              `json:"retrySafe,omitempty"`
	Input     []FieldDescriptor `json:"input,omitempty"`
	Outputs   []string          `json:"outputs,omitempty"`
	Needs     []Need            `json:"needs,omitempty"`
	After     []string          `json:"after,omitempty"`
	Doc       string            `json:"doc,omitempty"`
	Lifecycle bool              `json:"lifecycle,omitempty"`
}

// FieldDescriptor is a Field as published: all of it but Check, which a
// worker cannot send (a value it refuses still fails when the step runs).
type FieldDescriptor struct {
	Name     string   `json:"name"`
	Type     Type     `json:"type"`
	Required bool     `json:"required,omitempty"`
	Default  any      `json:"default,omitempty"`
	Min      *int64   `json:"min,omitempty"`
	Max      *int64   `json:"max,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	FromStep bool     `json:"fromStep,omitempty"`
	Doc      string   `json:"doc,omitempty"`
}

// Describe returns the step's descriptor.
func (s Step) Describe() Descriptor {
	d := Descriptor{ID: s.ID, RunsOn: s.RunsOn, Relays: s.Relays, Sends: s.Sends, Timeout: s.Timeout.String(),
		RetrySafe: s.RetrySafe, Outputs: s.Outputs, Needs: s.Needs, After: s.After, Doc: s.Doc, Lifecycle: s.Lifecycle}
	for _, f := range s.Input {
		d.Input = append(d.Input, FieldDescriptor{Name: f.Name, Type: f.Type, Required: f.Required, Default: f.Default,
			Min: f.Min, Max: f.Max, Enum: f.Enum, FromStep: f.FromStep, Doc: f.Doc})
	}
	return d
}

// Describe returns the descriptors of steps, in their order.
func Describe(steps []Step) []Descriptor {
	out := make([]Descriptor, 0, len(steps))
	for _, s := range steps {
		out = append(out, s.Describe())
	}
	return out
}

// Step builds the step a descriptor describes, for resolving profiles
// against it: it has no Run, and its fields no Check. A descriptor that
// would not register (a bad id, runsOn, timeout, field type or default) is
// an error naming what is wrong.
func (d Descriptor) Step() (Step, error) {
	timeout, err := time.ParseDuration(d.Timeout)
	if err != nil {
		return Step{}, fmt.Errorf("step %s: timeout %q is not a duration like 2m0s", d.ID, d.Timeout)
	}
	s := Step{ID: d.ID, RunsOn: d.RunsOn, Relays: d.Relays, Sends: d.Sends, Timeout: timeout, RetrySafe: d.RetrySafe,
		Outputs: d.Outputs, Needs: d.Needs, After: d.After, Doc: d.Doc, Lifecycle: d.Lifecycle}
	for _, f := range d.Input {
		field := Field{Name: f.Name, Type: f.Type, Required: f.Required, Min: f.Min, Max: f.Max, Enum: f.Enum,
			FromStep: f.FromStep, Doc: f.Doc}
		switch f.Type {
		case String, Int, Bool, Image:
		default:
			return Step{}, fmt.Errorf("step %s: input %s has type %q: string, int, bool or image", d.ID, f.Name, f.Type)
		}
		if f.Default != nil { // JSON gave a float64 for an int: back to the field's type
			if field.Default, err = field.convert(f.Default); err != nil {
				return Step{}, fmt.Errorf("step %s: the default of %s: %v", d.ID, f.Name, err)
			}
		}
		s.Input = append(s.Input, field)
	}
	for _, n := range d.Needs {
		if n != NeedsRamdisk && n != NeedsVirtualMedia {
			return Step{}, fmt.Errorf("step %s: unknown need %q: %s or %s", d.ID, n, NeedsRamdisk, NeedsVirtualMedia)
		}
	}
	return s, s.check()
}

// DecodeDescriptor decodes one published descriptor (JSON) into the step
// it describes (Descriptor.Step); unknown fields are refused, so a newer
// worker's descriptor is not half understood.
func DecodeDescriptor(b []byte) (Step, error) {
	var d Descriptor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Step{}, fmt.Errorf("a step descriptor does not decode: %v", err)
	}
	return d.Step()
}
