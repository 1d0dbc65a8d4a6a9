package workflows_test

import (
	"encoding/json"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	wf "github.com/better-compute/better-compute/workflows"
)

// TestDeployRendersUserData: a deploy.image with userDataRef has the
// control plane render it (userdata.render, after the image is pinned,
// naming the profile field) and sends the ramdisk only where the site
// serves the seed and its digest, never the secret's reference.
func TestDeployRendersUserData(t *testing.T) {
	f := newFake("bcd", nodestate.Ready)
	f.profile.Steps[0].With["userDataRef"] = "secret://acme/ud"
	const path, sum = "/artifacts/x7/cidata.iso", "5e"
	render := func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterActivityWithOptions(act(f, kinds.ActRenderUserData, func(kinds.UserDataInput) (kinds.UserDataOutput, error) {
			return kinds.UserDataOutput{Path: path, SHA256: sum}, nil
		}), activity.RegisterOptions{Name: kinds.ActRenderUserData})
	}
	res, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1}, render)
	if err != nil || res.State != nodestate.Deployed {
		t.Fatalf("Deploy = %+v, %v; want deployed", res, err)
	}
	want := kinds.UserDataInput{TenantID: "acme", NodeID: "node_1", Owner: "acme", Ref: "secret://acme/ud", Field: "profile.steps[0].with.userDataRef"}
	if in := f.inputs[kinds.ActRenderUserData]; len(in) != 1 || in[0] != want {
		t.Errorf("userdata.render inputs = %+v, want one: %+v", in, want)
	}
	if i, j := index(f.calls, kinds.CacheEnsureImage), index(f.calls, kinds.ActRenderUserData); i < 0 || j < i {
		t.Errorf("calls = %v, want userdata.render after cache.ensureImage", f.calls)
	}
	for _, c := range f.ramdiskCmds {
		if c.Kind != kinds.DeployImage {
			continue
		}
		var in kinds.DeployImageInput
		json.Unmarshal(c.Payload, &in)
		if in.UserDataRef != path || in.UserDataSHA256 != sum || strings.Contains(string(c.Payload), "secret://") {
			t.Errorf("deploy.image payload = %s, want userDataRef %s and its digest only", c.Payload, path)
		}
	}
}

func index(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// TestDeployPublicProfileImageFromOwner: the deploy of another tenant's
// public profile reads its image (image.get) and renders its user data
// in the profile owner's tenant, which profile.get names.
func TestDeployPublicProfileImageFromOwner(t *testing.T) {
	f := newFake("bcd", nodestate.Ready)
	f.profile.Steps[0].With["userDataRef"] = "secret://root/ud"
	owned := func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterActivityWithOptions(act(f, kinds.ActGetProfile, func(in kinds.ProfileInput) (kinds.Profile, error) {
			p, err := f.getProfile(in)
			p.Owner = "root"
			return p, err
		}), activity.RegisterOptions{Name: kinds.ActGetProfile})
		env.RegisterActivityWithOptions(act(f, kinds.ActRenderUserData, func(kinds.UserDataInput) (kinds.UserDataOutput, error) {
			return kinds.UserDataOutput{Path: "/artifacts/x/cidata.iso", SHA256: "5e"}, nil
		}), activity.RegisterOptions{Name: kinds.ActRenderUserData})
	}
	if res, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1}, owned); err != nil || res.State != nodestate.Deployed {
		t.Fatalf("Deploy = %+v, %v; want deployed", res, err)
	}
	if in := f.inputs[kinds.ActGetImage]; len(in) != 1 || in[0].(kinds.ImageInput).Owner != "root" || in[0].(kinds.ImageInput).TenantID != "acme" {
		t.Errorf("image.get inputs = %+v, want one of tenant acme, owner root", in)
	}
	if in := f.inputs[kinds.ActRenderUserData]; len(in) != 1 || in[0].(kinds.UserDataInput).Owner != "root" {
		t.Errorf("userdata.render inputs = %+v, want one with owner root", in)
	}
}
