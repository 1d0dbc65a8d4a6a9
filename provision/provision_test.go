package provision

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func good() Profile {
	return Profile{ID: "ubuntu-24.04-gpu-host", Version: 1, Target: "metal", Role: "host",
		Steps: []Step{{Use: "deploy.image"}, {Use: "power.setPower", On: "site", With: map[string]any{"action": "cycle"}}}}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if got := good().Validate(); len(got) != 0 {
		t.Fatalf("Validate(good) = %v, want none", got)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Profile)
		fields []string
	}{
		{"bad id", func(p *Profile) { p.ID = "Ubuntu 24" }, []string{"id"}},
		{"version 0", func(p *Profile) { p.Version = 0 }, []string{"version"}},
		{"target", func(p *Profile) { p.Target = "vm" }, []string{"target"}},
		{"role", func(p *Profile) { p.Role = "" }, []string{"role"}},
		{"visibility", func(p *Profile) { p.Visibility = "everyone" }, []string{"visibility"}},
		{"no steps", func(p *Profile) { p.Steps = nil }, []string{"steps"}},
		{"step use", func(p *Profile) { p.Steps[1].Use = "rm -rf" }, []string{"steps[1].use"}},
		{"step on", func(p *Profile) { p.Steps[0].On = "ramdisk" }, []string{"steps[0].on"}},
		{"two at once", func(p *Profile) { p.Version = -1; p.Steps[0].Use = "x" }, []string{"version", "steps[0].use"}},
	} {
		p := good()
		tc.mutate(&p)
		var fields []string
		for _, pr := range p.Validate() {
			fields = append(fields, pr.Field)
		}
		if diff := cmp.Diff(tc.fields, fields); diff != "" {
			t.Errorf("Validate(%s) fields (-want +got):\n%s", tc.name, diff)
		}
	}
}
