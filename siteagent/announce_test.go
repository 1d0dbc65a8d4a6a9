package siteagent

import (
	"slices"
	"testing"
	"time"

	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
	"github.com/better-compute/better-compute/steps"
)

// TestAnnouncesBMCDrivers: a started site agent tells the control plane
// which BMC drivers it has, so enroll can refuse a node it cannot drive.
func TestAnnouncesBMCDrivers(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.Drivers = map[string]DriverFactory{"redfish": nil, "ipmi": nil}
	startAgent(t, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for cp.Announced() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := cp.Announced(); !slices.Equal(got, []string{"ipmi", "redfish"}) {
		t.Errorf("announced BMC drivers = %v, want [ipmi redfish]", got)
	}
}

// TestAnnouncesSteps: a started site agent announces the steps it serves -
// the built-ins and its plugins' that run on the site or the ramdisk, with
// their manifests - and not the control plane's.
func TestAnnouncesSteps(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.Plugins = []sdk.Plugin{{ID: "acme", Steps: []sdk.Step{
		{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute, Outputs: []string{"url"}},
		{ID: "acme.mount", RunsOn: sdk.Site, Timeout: time.Minute, Needs: []sdk.Need{sdk.NeedsVirtualMedia},
			Input: sdk.Manifest{{Name: "url", Type: sdk.String, Required: true, FromStep: true},
				{Name: "tries", Type: sdk.Int, Default: int64(3), Min: sdk.Ptr(1), Max: sdk.Ptr(9)}}},
	}}}
	startAgent(t, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for cp.Announced() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]sdk.Step{}
	for _, d := range cp.AnnouncedSteps() {
		b, _ := d.MarshalJSON()
		s, err := sdk.DecodeDescriptor(b)
		if err != nil {
			t.Fatalf("announced step %s: %v", b, err)
		}
		got[s.ID] = s
	}
	var ids []string
	for id := range got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	want := []string{"acme.mount"}
	for _, s := range steps.Builtins().Steps {
		if s.RunsOn != sdk.ControlPlane {
			want = append(want, s.ID)
		}
	}
	slices.Sort(want)
	if len(want) < 5 {
		t.Fatalf("built-in site and ramdisk steps = %v, want deploy.image, power.setPower…", want)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("announced steps = %v, want %v", ids, want)
	}
	m := got["acme.mount"]
	if f := m.Input.Field("tries"); m.Timeout != time.Minute || !slices.Equal(m.Needs, []sdk.Need{sdk.NeedsVirtualMedia}) ||
		f == nil || f.Default != int64(3) || *f.Max != 9 || !m.Input.Field("url").FromStep {
		t.Errorf("announced acme.mount = %+v, want its timeout, needs and manifest", m)
	}
}
