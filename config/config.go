// Package config reads the control plane's configuration file: the hardware
// profiles pools name in policy.hardwareProfile, each a set of drivers
// (power, management, boot, deploy).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/better-compute/better-compute/errs"
)

// Drivers a hardware profile may name, per role.
var knownDrivers = map[string][]string{
	"power":      {"redfish", "ipmi"},
	"management": {"redfish", "ipmi"},
	"boot":       {"ipxe", "virtual-media"},
	"deploy":     {"image-stream", "installer", "none"},
}

// Drivers names the driver for each role of a hardware profile.
type Drivers struct {
	Power      string `yaml:"power" json:"power"`
	Management string `yaml:"management" json:"management"`
	Boot       string `yaml:"boot" json:"boot"`
	Deploy     string `yaml:"deploy" json:"deploy"`
}

// HardwareProfile is one entry of hardwareProfiles.
type HardwareProfile struct {
	Description string  `yaml:"description" json:"description"`
	Drivers     Drivers `yaml:"drivers" json:"drivers"`
}

// HardwareProfiles by id.
type HardwareProfiles map[string]HardwareProfile

// IDs returns the profile ids in order.
func (h HardwareProfiles) IDs() []string {
	ids := make([]string, 0, len(h))
	for id := range h {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Builtin returns the hardware profiles a fresh install has, so the first
// pool needs no hand-written file: any server behind a Redfish BMC, and any
// behind IPMI, PXE-booted by the site agent and deployed by streaming an
// image. The configuration file adds profiles and overrides these by id.
func Builtin() HardwareProfiles {
	return HardwareProfiles{
		"redfish": {Description: "built-in: a server with a Redfish BMC, PXE-booted by the site agent, image streamed to disk",
			Drivers: Drivers{Power: "redfish", Management: "redfish", Boot: "ipxe", Deploy: "image-stream"}},
		"ipmi": {Description: "built-in: a server with an IPMI BMC, PXE-booted by the site agent, image streamed to disk",
			Drivers: Drivers{Power: "ipmi", Management: "ipmi", Boot: "ipxe", Deploy: "image-stream"}},
	}
}

// Config is the control plane's configuration file.
type Config struct {
	HardwareProfiles HardwareProfiles `yaml:"hardwareProfiles"`
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Load reads path. A missing file is the built-in profiles alone; a file that does
// not parse, has unknown keys or names unknown drivers is an error naming the
// file and the key.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{HardwareProfiles: Builtin()}, nil
	}
	if err != nil {
		return Config{}, errs.Wrap(errs.InvalidInput, err, "read configuration %s", path)
	}
	return Parse(path, b)
}

// Parse parses a configuration document over the built-in profiles; name is
// used in errors.
func Parse(name string, b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, errs.Wrap(errs.InvalidInput, err, "configuration %s", name)
	}
	if c.HardwareProfiles == nil {
		c.HardwareProfiles = HardwareProfiles{}
	}
	for _, id := range c.HardwareProfiles.IDs() {
		if err := validate(id, c.HardwareProfiles[id]); err != nil {
			return Config{}, fmt.Errorf("configuration %s: %w", name, err)
		}
	}
	for id, p := range Builtin() {
		if _, ok := c.HardwareProfiles[id]; !ok {
			c.HardwareProfiles[id] = p
		}
	}
	return c, nil
}

func validate(id string, p HardwareProfile) error {
	field := "hardwareProfiles." + id
	if !idPattern.MatchString(id) {
		return errs.Invalid(field, "a hardware profile id is lowercase letters, digits, '.', '_' and '-'")
	}
	for role, got := range map[string]string{"power": p.Drivers.Power, "management": p.Drivers.Management,
		"boot": p.Drivers.Boot, "deploy": p.Drivers.Deploy} {
		if !slices.Contains(knownDrivers[role], got) {
			return errs.Invalid(field+".drivers."+role, "driver %q is not one of %v", got, knownDrivers[role])
		}
	}
	return nil
}
