package sdk_test

import (
	"context"
	"fmt"
	"time"

	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
)

// A plugin with a control-plane step whose output a later site step reads
// with fromStep, and a step that waits for the world by saying NotReady.
func ExampleNewRegistry() {
	plugin := sdk.Plugin{ID: "acme", Steps: []sdk.Step{
		{ID: "acme.render", RunsOn: sdk.ControlPlane, Timeout: time.Minute, RetrySafe: true,
			Input:   sdk.Manifest{{Name: "hostname", Type: sdk.String, Required: true}},
			Outputs: []string{"url"},
			Run: func(ctx context.Context, c *sdk.Context, in sdk.Values) (sdk.Values, error) {
				return sdk.Values{"url": "https://site.example/" + c.Node.ID + "/seed.iso"}, nil
			}},
		{ID: "acme.mount", RunsOn: sdk.Site, Timeout: time.Minute, RetrySafe: true, Needs: []sdk.Need{sdk.NeedsVirtualMedia},
			Input: sdk.Manifest{{Name: "url", Type: sdk.String, Required: true, FromStep: true},
				{Name: "retries", Type: sdk.Int, Default: int64(3), Min: sdk.Ptr(0), Max: sdk.Ptr(10)}},
			Run: func(ctx context.Context, c *sdk.Context, in sdk.Values) (sdk.Values, error) {
				return nil, sdk.NotReady(10 * time.Second) // the BMC is still busy: call again in 10 s
			}},
	}}
	reg, err := sdk.NewRegistry(plugin)
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, problems := reg.Resolve([]provision.Step{
		{Use: "acme.render", With: map[string]any{"hostname": "web-1"}},
		{Use: "acme.mount", With: map[string]any{"fromStep": "acme.render"}},
	}, nil)
	for _, s := range plan.Steps {
		fmt.Println(s.Use, s.RunsOn, s.With, s.FromStep, s.FromFields)
	}
	_, problems = reg.Resolve([]provision.Step{{Use: "acme.mount", With: map[string]any{"url": "u", "retries": 11}}}, nil)
	for _, p := range problems {
		fmt.Println(p.Field+":", p.Message)
	}
	// Output:
	// acme.render control-plane map[hostname:web-1]  []
	// acme.mount site map[retries:3] acme.render [url]
	// steps[0].with.retries: with.retries must be a whole number from 0 to 10, got 11
}

func ExampleRenderTemplate() {
	out, err := sdk.RenderTemplate("#cloud-config\nhostname: {{hostname}}\n", map[string]string{"hostname": "web-1"})
	fmt.Print(out, err, "\n")
	_, err = sdk.RenderTemplate("token: {{token}}", map[string]string{})
	fmt.Println(err)
	// Output:
	// #cloud-config
	// hostname: web-1
	// <nil>
	// the template uses token, which the data does not hold
}
