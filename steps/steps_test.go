package steps

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
)

func TestBuiltinsResolve(t *testing.T) {
	r, err := Registry()
	if err != nil {
		t.Fatalf("Registry() = %v", err)
	}
	plan, probs := r.Resolve([]provision.Step{
		{Use: "media.insert", With: map[string]any{"url": "https://site/a.iso"}},
		{Use: "management.setBootDevice", With: map[string]any{"device": "cd"}},
		{Use: "power.setPower", With: map[string]any{"action": "cycle"}},
		{Use: "media.eject"},
		{Use: "deploy.image", With: map[string]any{"image": "img_1", "disk": "wwn-0x1"}},
		{Use: "boot.kexec"},
	}, nil)
	if len(probs) > 0 {
		t.Fatalf("Resolve = %v", probs)
	}
	var got []string
	for _, s := range plan.Steps {
		got = append(got, string(s.RunsOn)+" "+s.Use)
	}
	want := []string{"site media.insert", "site management.setBootDevice", "site power.setPower", "site media.eject",
		"ramdisk deploy.image", "ramdisk boot.kexec"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sdk.Values{"image": "img_1", "disk": "wwn-0x1", "format": "raw"}, plan.Steps[4].With); diff != "" {
		t.Errorf("deploy.image with (-want +got):\n%s", diff)
	}
	if plan.Steps[4].Image != "image" {
		t.Errorf("deploy.image's image input = %q, want image", plan.Steps[4].Image)
	}
	if diff := cmp.Diff(sdk.Values{"device": "cd", "persistent": false}, plan.Steps[1].With); diff != "" {
		t.Errorf("management.setBootDevice with (-want +got):\n%s", diff)
	}
}

func TestBuiltinsRefuse(t *testing.T) {
	r, err := Registry()
	if err != nil {
		t.Fatalf("Registry() = %v", err)
	}
	no := false
	cases := []struct {
		name  string
		steps []provision.Step
		want  []string
	}{
		{"power action", []provision.Step{{Use: "power.setPower", With: map[string]any{"action": "explode"}}}, []string{"steps[0].with.action"}},
		{"no power action", []provision.Step{{Use: "power.setPower"}}, []string{"steps[0].with.action"}},
		{"boot device", []provision.Step{{Use: "management.setBootDevice", With: map[string]any{"device": "usb"}}}, []string{"steps[0].with.device"}},
		{"persistent", []provision.Step{{Use: "management.setBootDevice", With: map[string]any{"device": "pxe", "persistent": "yes"}}},
			[]string{"steps[0].with.persistent"}},
		{"format", []provision.Step{{Use: "deploy.image", With: map[string]any{"image": "img_1", "format": "qcow2"}}}, []string{"steps[0].with.format"}},
		{"image", []provision.Step{{Use: "deploy.image"}}, []string{"steps[0].with.image"}},
		{"kexec first", []provision.Step{{Use: "boot.kexec"}}, []string{"steps[0].use"}},
		{"media url", []provision.Step{{Use: "media.insert", With: map[string]any{"url": "ftp://x/a.iso"}}}, []string{"steps[0].with.url"}},
		{"media url from a step without it", []provision.Step{{Use: "media.eject"}, {Use: "media.insert", With: map[string]any{"fromStep": "media.eject"}}},
			[]string{"steps[1].with.fromStep"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, probs := r.Resolve(tc.steps, nil)
			var got []string
			for _, p := range probs {
				got = append(got, p.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Resolve problems (-want +got):\n%s\n%v", diff, probs)
			}
		})
	}
	_, probs := r.Resolve([]provision.Step{{Use: "media.insert", With: map[string]any{"url": "https://x/a.iso"}}},
		&sdk.Target{VirtualMedia: &no, BMCDriver: "ipmi"})
	if len(probs) != 1 || probs[0].Field != "steps[0].use" {
		t.Errorf("media.insert on IPMI = %v, want a problem at steps[0].use", probs)
	}
}

// TestLifecycleCommandsAreSteps: the lifecycle's own commands are
// registered through the SDK like the other built-ins, with where each
// runs and its timeout, so one registry says what bcd site serves; a
// profile naming one is refused at its field with what it is, and the
// list of steps a profile may use leaves them out.
func TestLifecycleCommandsAreSteps(t *testing.T) {
	r, err := Registry()
	if err != nil {
		t.Fatalf("Registry() = %v", err)
	}
	for _, tc := range []struct {
		id      string
		runsOn  sdk.RunsOn
		timeout time.Duration
	}{
		{kinds.BMCInspect, sdk.Site, BMCTimeout},
		{kinds.BootSetEntry, sdk.Site, tableTimeout},
		{kinds.BootClearEntry, sdk.Site, tableTimeout},
		{kinds.CacheEnsureImage, sdk.Site, cacheTimeout},
		{kinds.InventoryRefresh, sdk.Ramdisk, inventoryTimeout},
		{kinds.DiskWipe, sdk.Ramdisk, wipeTimeout},
		{kinds.LogsCollect, sdk.Ramdisk, inventoryTimeout},
		{kinds.DiagNVML, sdk.Ramdisk, inventoryTimeout},
	} {
		s, ok := r.Step(tc.id)
		if !ok || s.RunsOn != tc.runsOn || !s.Lifecycle || s.Timeout != tc.timeout || Timeout(tc.id) != tc.timeout {
			t.Errorf("step %s = %+v (registered %v), want a lifecycle step on %s with timeout %s", tc.id, s, ok, tc.runsOn, tc.timeout)
		}
		_, probs := r.Resolve([]provision.Step{{Use: "power.setPower", With: map[string]any{"action": "on"}}, {Use: tc.id}}, nil)
		if len(probs) != 1 || probs[0].Field != "steps[1].use" || !strings.Contains(probs[0].Message, "lifecycle's own commands") {
			t.Errorf("a profile using %s: problems %v, want one at steps[1].use saying it is a lifecycle command", tc.id, probs)
		}
		if strings.Contains(probs[0].Message, "profile steps are") && strings.Contains(probs[0].Message[strings.Index(probs[0].Message, "profile steps are"):], tc.id) {
			t.Errorf("the steps a profile may use list %s: %s", tc.id, probs[0].Message)
		}
	}
	// Published and read back (what the API resolves a site's steps by),
	// a lifecycle step stays one.
	wipe, _ := r.Step(kinds.DiskWipe)
	b, err := json.Marshal(wipe.Describe())
	if err != nil {
		t.Fatal(err)
	}
	back, err := sdk.DecodeDescriptor(b)
	if err != nil || !back.Lifecycle {
		t.Errorf("disk.wipe published and decoded = %+v, %v; want a lifecycle step", back, err)
	}
}
