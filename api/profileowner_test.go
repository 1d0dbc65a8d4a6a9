package api_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/provision"
	wf "github.com/better-compute/better-compute/workflows"
)

// inputs is a Temporal client that keeps each workflow's input.
type inputs struct {
	starts
	got *[]wf.Input
}

func (c inputs) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, w any, args ...any) (client.WorkflowRun, error) {
	if in, ok := args[0].(wf.Input); ok {
		*c.got = append(*c.got, in)
	}
	return c.starts.ExecuteWorkflow(ctx, o, w, args...)
}

// TestDeployCarriesCheckedProfileOwner: metal deploy puts the owner of the
// profile it checked in the workflow's input (ProfileTenant), root for
// root's public profile, so profile.get reads that one, not a profile of
// the same id acme creates after the check.
func TestDeployCarriesCheckedProfileOwner(t *testing.T) {
	t.Parallel()
	d := newDeployEnv(t)
	var got []wf.Input
	srv := httptest.NewServer(api.New(api.Config{Store: d.store, Temporal: inputs{starts{n: d.started}, &got}}).Handler())
	t.Cleanup(srv.Close)
	d.url = srv.URL
	img := d.image(t, d.root)
	d.profile(t, "root", "pub", "public", provision.Step{Use: "deploy.image", With: map[string]any{"image": img}},
		provision.Step{Use: "boot.kexec"})
	node := d.readyNode(t, "acme")
	if started, kind, f, msg := d.deploy(t, d.acme, node, "pub"); !started {
		t.Fatalf("acme deploys root's public profile = %s %s %q, want it started", kind, f, msg)
	}
	if len(got) != 1 || got[0].ProfileTenant != "root" || got[0].ProfileID != "pub" {
		t.Errorf("deploy workflow input = %+v, want ProfileTenant root, ProfileID pub", got)
	}
}
