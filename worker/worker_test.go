package worker

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/activities/site"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// TestWorkersRefuseAStepWithoutRun: a plugin step that must run on this
// worker but has no Run stops the worker before it starts, naming it.
func TestWorkersRefuseAStepWithoutRun(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	reg, err := steps.Registry(sdk.Plugin{ID: "acme", Steps: []sdk.Step{
		{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute},
		{ID: "acme.flash", RunsOn: sdk.Site, Timeout: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ControlPlane(c, &controlplane.Activities{Steps: reg}, nil); err == nil || !strings.Contains(err.Error(), "acme.render") {
		t.Errorf("ControlPlane(a step without Run) = %v, want an error naming acme.render", err)
	}
	if _, err := Site(c, "site_1", &site.Activities{}, SiteOptions{Steps: reg}); err == nil || !strings.Contains(err.Error(), "acme.flash") {
		t.Errorf("Site(a step without Run) = %v, want an error naming acme.flash", err)
	}
	if _, err := ControlPlane(c, &controlplane.Activities{}, nil); err != nil {
		t.Errorf("ControlPlane(built-ins) = %v, want a worker", err)
	}
	if _, err := Site(c, "site_1", &site.Activities{}, SiteOptions{}); err != nil {
		t.Errorf("Site(built-ins) = %v, want a worker", err)
	}
}
