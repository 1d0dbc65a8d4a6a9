// Package provision holds the provision profile: an ordered list of steps,
// each naming the step it uses, where it runs and its input. It checks a
// profile's shape; resolving each step against the registered steps is the
// step registry's job.
package provision

import (
	"fmt"
	"regexp"
)

// Targets a profile may provision.
const TargetMetal = "metal"

// Where a step may be asked to run.
const (
	OnSite         = "site"
	OnControlPlane = "control-plane"
)

// MaxSteps bounds a profile's length.
const MaxSteps = 100

// Step is one entry of a profile's steps.
type Step struct {
	Use  string         `json:"use"`
	On   string         `json:"on,omitempty"`
	With map[string]any `json:"with,omitempty"`
}

// Profile is a provision profile document.
type Profile struct {
	ID         string `json:"id"`
	Version    int    `json:"version"`
	Target     string `json:"target"`
	Role       string `json:"role"`
	Steps      []Step `json:"steps"`
	Visibility string `json:"visibility,omitempty"`
}

// Problem is one thing wrong with a profile, naming the field.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

var (
	idPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	rolePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	stepPattern = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)+$`)
)

// Visibilities a profile may have; "" means private.
var visibilities = map[string]bool{"": true, "private": true, "public": true}

// Validate returns every problem with the profile's shape, in field order;
// none means the shape is right.
func (p Profile) Validate() []Problem {
	var out []Problem
	add := func(field, format string, args ...any) {
		out = append(out, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !idPattern.MatchString(p.ID) {
		add("id", "an id is 1-63 lowercase letters, digits, '.', '_' or '-', got %q", p.ID)
	}
	if p.Version < 1 {
		add("version", "a version is a whole number from 1, got %d", p.Version)
	}
	if p.Target != TargetMetal {
		add("target", "target must be %q, got %q", TargetMetal, p.Target)
	}
	if !rolePattern.MatchString(p.Role) {
		add("role", "a role is a lowercase word such as host, got %q", p.Role)
	}
	if !visibilities[p.Visibility] {
		add("visibility", "visibility must be private or public, got %q", p.Visibility)
	}
	if len(p.Steps) == 0 || len(p.Steps) > MaxSteps {
		add("steps", "a profile has 1 to %d steps, got %d", MaxSteps, len(p.Steps))
	}
	for i, s := range p.Steps {
		f := fmt.Sprintf("steps[%d]", i)
		if !stepPattern.MatchString(s.Use) {
			add(f+".use", "a step id is dotted lowerCamel words such as deploy.image, got %q", s.Use)
		}
		if s.On != "" && s.On != OnSite && s.On != OnControlPlane {
			add(f+".on", "on must be %q or %q, got %q", OnSite, OnControlPlane, s.On)
		}
	}
	return out
}
