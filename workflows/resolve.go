package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/provision"
)

// stepInputs are each built-in step's inputs (the keys of its with), the
// required ones first.
var stepInputs = map[string]struct{ required, optional []string }{
	StepDeployImage:   {required: []string{"image"}, optional: []string{"disk", "format", "userDataRef"}},
	StepBootKexec:     {},
	StepSetPower:      {required: []string{"action"}},
	StepSetBootDevice: {required: []string{"device"}},
}

// ResolveSteps resolves a profile's steps against the steps this control
// plane runs, before any profile is stored or any workflow starts: each
// step must be one of them, with only its inputs, each of the right kind,
// and boot.kexec only after a deploy.image. A problem names the field
// (steps[i].use, steps[i].with.action…). Images are named by id here; the
// caller checks they exist.
func ResolveSteps(steps []provision.Step) []provision.Problem {
	var out []provision.Problem
	add := func(field, format string, args ...any) {
		out = append(out, provision.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	deployed := false
	for i, s := range steps {
		f := fmt.Sprintf("steps[%d]", i)
		in, ok := stepInputs[s.Use]
		if !ok {
			add(f+".use", "unknown step %q: this control plane runs %s (plugin steps come with the step registry)",
				s.Use, strings.Join(BuiltinSteps(), ", "))
			continue
		}
		for _, k := range in.required {
			if v, ok := s.With[k].(string); !ok || v == "" {
				add(f+".with."+k, "%s needs with.%s (a string)", s.Use, k)
			}
		}
		for _, k := range sortedKeys(s.With) {
			if !slices.Contains(in.required, k) && !slices.Contains(in.optional, k) {
				add(f+".with."+k, "%s takes no input %q (it takes %s)", s.Use, k, inputList(in.required, in.optional))
			} else if _, ok := s.With[k].(string); !ok {
				add(f+".with."+k, "with.%s must be a string", k)
			}
		}
		switch s.Use {
		case StepDeployImage:
			if img := str(s.With, "image"); img != "" && !ids.Valid(ids.Image, img) {
				add(f+".with.image", "want a catalog image id like img_01k5w…, got %q", img)
			}
			deployed = true
		case StepBootKexec:
			if !deployed {
				add(f+".use", "boot.kexec needs a deploy.image before it")
			}
		case StepSetPower:
			if a := str(s.With, "action"); a != "" {
				if _, err := bmc.ParsePowerAction(a); err != nil {
					add(f+".with.action", "%s", errMessage(err))
				}
			}
		case StepSetBootDevice:
			if d := str(s.With, "device"); d != "" {
				if _, err := bmc.ParseBootDevice(d); err != nil {
					add(f+".with.device", "%s", errMessage(err))
				}
			}
		}
	}
	return out
}

// ImagesOf returns the catalog images a profile's deploy.image steps name,
// by step index, for the caller to check they exist.
func ImagesOf(steps []provision.Step) map[int]string {
	out := map[int]string{}
	for i, s := range steps {
		if img := str(s.With, "image"); s.Use == StepDeployImage && img != "" {
			out[i] = img
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func inputList(required, optional []string) string {
	all := append(slices.Clone(required), optional...)
	if len(all) == 0 {
		return "none"
	}
	return strings.Join(all, ", ")
}

// errMessage is an errs error's message without its kind and field.
func errMessage(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, ": "); ok {
		return rest
	}
	return msg
}
