package steps

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
)

// TestRegistryRefusesReservedIDs: a plugin step named like one of our own
// activities (a control-plane activity, a site kind, a relayed ramdisk
// kind) is refused with an error naming it, before any worker registers it.
func TestRegistryRefusesReservedIDs(t *testing.T) {
	run := func(context.Context, *sdk.Context, sdk.Values) (sdk.Values, error) { return nil, nil }
	for _, tc := range []struct {
		id     string
		runsOn sdk.RunsOn
	}{
		{kinds.ActTransition, sdk.ControlPlane},
		{kinds.BootSetEntry, sdk.Site},
		{kinds.DiskWipe, sdk.Ramdisk},
		{kinds.ActRenderUserData, sdk.ControlPlane},
	} {
		p := sdk.Plugin{ID: "acme", Steps: []sdk.Step{{ID: tc.id, RunsOn: tc.runsOn, Timeout: time.Minute, Run: run}}}
		_, err := Registry(p)
		if err == nil || !strings.Contains(err.Error(), tc.id) || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("Registry(step %s) = %v, want an error naming the step as reserved", tc.id, err)
		}
	}
	ok := sdk.Plugin{ID: "acme", Steps: []sdk.Step{{ID: "acme.renderIso", RunsOn: sdk.ControlPlane, Timeout: time.Minute, Run: run}}}
	if _, err := Registry(ok); err != nil {
		t.Errorf("Registry(acme.renderIso) = %v, want nil", err)
	}
}
