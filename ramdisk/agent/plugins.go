package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// pluginSteps checks the plugins as every worker does (steps.Registry: ids,
// timeouts, reserved names) and returns their ramdisk steps, by id; one
// without a Run is an error naming it, before the ramdisk joins.
func pluginSteps(plugins []sdk.Plugin) (map[string]sdk.Step, error) {
	if len(plugins) == 0 {
		return nil, nil
	}
	if _, err := steps.Registry(plugins...); err != nil { // ids, timeouts, reserved names
		return nil, errs.Wrap(errs.InvalidInput, err, "the ramdisk's plugins")
	}
	out := map[string]sdk.Step{}
	for _, p := range plugins {
		for _, s := range p.Steps {
			if s.RunsOn != sdk.Ramdisk {
				continue
			}
			if s.Run == nil {
				return nil, errs.New(errs.InvalidInput, "ramdisk step %s has no Run: its plugin must give one", s.ID)
			}
			out[s.ID] = s
		}
	}
	return out, nil
}

// pluginStep runs a plugin's ramdisk step: its input is the command's
// payload (the step's with values, the sdk package's contract), its
// Context the node and the command; its outputs are the result's payload.
// NotReady is UNAVAILABLE, which the site's relay retries; a panic is
// INTERNAL (run).
func (a *agent) pluginStep(s sdk.Step) handler {
	return func(ctx context.Context, cmd kinds.Command, _ *tracker) (any, error) {
		var in sdk.Values
		if err := json.Unmarshal(cmd.Payload, &in); err != nil {
			return nil, errs.Invalid("payload", "%s: the command's payload is not a JSON object: %v", s.ID, err)
		}
		c := &sdk.Context{Node: sdk.Node{ID: a.nodeID}, Step: cmd.ID}
		out, err := s.Run(ctx, c, in)
		if d, ok := sdk.IsNotReady(err); ok {
			return nil, errs.New(errs.Unavailable, "%s is not ready; try again in %s", s.ID, d)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.ID, err)
		}
		if out == nil {
			out = sdk.Values{}
		}
		return out, nil
	}
}
