package store_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// TestPublishSteps: a worker's published steps replace what it published
// before, each site's and each control-plane worker's (by its plugins)
// apart; a tenant reads the
// control plane's and its own sites', not another tenant's.
func TestPublishSteps(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	siteA, _, _ := s.CreateSite(ctx, store.Site{TenantID: "a", Kind: "shared", Region: "r"})
	siteB, _, _ := s.CreateSite(ctx, store.Site{TenantID: "b", Kind: "shared", Region: "r"})
	step := func(id string, on sdk.RunsOn) sdk.Step { return sdk.Step{ID: id, RunsOn: on, Timeout: time.Minute} }
	for _, p := range []struct {
		site, worker string
		steps        []sdk.Step
	}{
		{"", "bc,acme", []sdk.Step{step("acme.old", sdk.ControlPlane)}},
		{"", "bc,acme", []sdk.Step{step("acme.render", sdk.ControlPlane)}}, // replaces acme.old
		{"", "bc", []sdk.Step{step("wait.joined", sdk.ControlPlane)}},      // another worker: kept apart
		{siteA.ID, "", []sdk.Step{step("acme.old", sdk.Site)}},
		{siteA.ID, "", []sdk.Step{step("acme.mount", sdk.Site), step("acme.flash", sdk.Ramdisk)}}, // replaces acme.old
		{siteB.ID, "", []sdk.Step{step("other.x", sdk.Site)}},
	} {
		if err := s.PublishSteps(ctx, p.site, p.worker, p.steps); err != nil {
			t.Fatalf("PublishSteps(%q) = %v", p.site, err)
		}
	}
	got, err := s.PublishedSteps(ctx, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.SiteID+"/"+p.Worker+"/"+p.StepID)
		if st, err := sdk.DecodeDescriptor(p.Descriptor); err != nil || st.ID != p.StepID || st.Timeout != time.Minute {
			t.Errorf("stored descriptor of %s = %s (%v), want the step's", p.StepID, p.Descriptor, err)
		}
	}
	want := []string{"/bc/wait.joined", "/bc,acme/acme.render", siteA.ID + "//acme.flash", siteA.ID + "//acme.mount"}
	if !slices.Equal(names, want) {
		t.Errorf("PublishedSteps(a) = %v, want %v", names, want)
	}
	if err := s.PublishSteps(ctx, "site_01k5w0000000000000000000zz", "", []sdk.Step{step("acme.mount", sdk.Site)}); !errs.Is(err, errs.NotFound) {
		t.Errorf("PublishSteps(unknown site) = %v, want NOT_FOUND", err)
	}
}

// TestPublishStepsConcurrently: workers with the same plugins starting at
// once (two serve --only worker) each publish the same rows; each
// replaces the other's, and none fails on the unique key
// (published_steps_key) as they did when both deleted, then inserted.
func TestPublishStepsConcurrently(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	steps := []sdk.Step{{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute},
		{ID: "acme.check", RunsOn: sdk.ControlPlane, Timeout: time.Minute}}
	const workers, rounds = 6, 10
	errc := make(chan error, workers*rounds)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				errc <- s.PublishSteps(ctx, "", "bc,acme", steps)
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatalf("PublishSteps from %d workers at once = %v, want each to replace the rows", workers, err)
		}
	}
	got, err := s.PublishedSteps(ctx, []string{"a"})
	if err != nil || len(got) != 2 {
		t.Errorf("PublishedSteps after = %d rows, %v; want the 2 steps once", len(got), err)
	}
}
