package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
)

func TestParse(t *testing.T) {
	t.Parallel()
	good := `
hardwareProfiles:
  emulated-redfish:
    description: emulated machines
    drivers: {power: redfish, management: redfish, boot: ipxe, deploy: image-stream}
`
	c, err := Parse("good", []byte(good))
	if err != nil {
		t.Fatalf("Parse(good) error: %v", err)
	}
	want := Builtin()
	want["emulated-redfish"] = HardwareProfile{Description: "emulated machines",
		Drivers: Drivers{Power: "redfish", Management: "redfish", Boot: "ipxe", Deploy: "image-stream"}}
	if diff := cmp.Diff(want, c.HardwareProfiles); diff != "" {
		t.Errorf("Parse(good) profiles (-want +got):\n%s", diff)
	}

	for name, tc := range map[string]struct{ doc, field string }{
		"unknown driver": {`hardwareProfiles: {x: {drivers: {power: telnet, management: redfish, boot: ipxe, deploy: none}}}`, "hardwareProfiles.x.drivers.power"},
		"missing driver": {`hardwareProfiles: {x: {drivers: {power: ipmi, management: ipmi, boot: ipxe}}}`, "hardwareProfiles.x.drivers.deploy"},
		"bad id":         {`hardwareProfiles: {"Bad Id": {drivers: {power: ipmi, management: ipmi, boot: ipxe, deploy: none}}}`, "hardwareProfiles.Bad Id"},
		"unknown key":    {`hardwareProfile: {}`, ""},
		"not yaml":       {`hardwareProfiles: [`, ""},
	} {
		_, err := Parse(name, []byte(tc.doc))
		if !errs.Is(err, errs.InvalidInput) {
			t.Errorf("Parse(%s) = %v, want INVALID_INPUT", name, err)
			continue
		}
		var e *errs.Error
		if tc.field != "" && (!asErr(err, &e) || e.Field != tc.field) {
			t.Errorf("Parse(%s) field = %v, want %q", name, err, tc.field)
		}
	}
}

// TestBuiltinProfiles: a fresh install (no file) has the built-in redfish
// and ipmi profiles, each valid; a file adds to them and overrides one by id.
func TestBuiltinProfiles(t *testing.T) {
	t.Parallel()
	c, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if err != nil || !cmp.Equal(c.HardwareProfiles.IDs(), []string{"ipmi", "redfish"}) {
		t.Errorf("Load(missing) = %v, %v; want the built-in ipmi and redfish", c.HardwareProfiles.IDs(), err)
	}
	for id, p := range Builtin() {
		if err := validate(id, p); err != nil {
			t.Errorf("built-in %s: %v", id, err)
		}
	}
	c, err = Parse("override", []byte(`hardwareProfiles: {ipmi: {description: legacy BIOS racks, drivers: {power: ipmi, management: ipmi, boot: ipxe, deploy: none}}}`))
	if err != nil || c.HardwareProfiles["ipmi"].Drivers.Deploy != "none" || c.HardwareProfiles["redfish"].Drivers.Power != "redfish" {
		t.Errorf("Parse(override ipmi) = %+v, %v; want ipmi overridden and redfish kept", c.HardwareProfiles, err)
	}
}

func TestLoadEmptyFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("hardwareProfiles: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Errorf("Load(empty profiles) = %v, want nil", err)
	}
}

func asErr(err error, target **errs.Error) bool { return errors.As(err, target) }
