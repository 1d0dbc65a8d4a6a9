package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
	"github.com/better-compute/better-compute/sdk"
)

// TestPluginRamdiskStep: a plugin's ramdisk step runs on a ramdisk built
// with the plugin: its with values in, its outputs back in the signed
// result; NotReady is UNAVAILABLE (the site retries it). A ramdisk without
// the plugin answers UNSUPPORTED, naming what it runs.
func TestPluginRamdiskStep(t *testing.T) {
	t.Parallel()
	flash := sdk.Step{ID: "acme.flashFirmware", RunsOn: sdk.Ramdisk, Timeout: time.Minute, RetrySafe: true,
		Run: func(_ context.Context, c *sdk.Context, in sdk.Values) (sdk.Values, error) {
			if in.String("version") == "later" {
				return nil, sdk.NotReady(time.Second)
			}
			return sdk.Values{"flashed": in.String("version"), "node": c.Node.ID}, nil
		}}
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{Plugins: []sdk.Plugin{{ID: "acme", Steps: []sdk.Step{flash}}}}, "")

	id := ids.New(ids.Command)
	relay.Send(kinds.Command{ID: id, NodeID: a.node, Kind: flash.ID, Payload: json.RawMessage(`{"version":"2.1"}`)})
	res := relay.WaitResult(t, id, 1)
	var out sdk.Values
	if !res.OK || json.Unmarshal(res.Payload, &out) != nil || out.String("flashed") != "2.1" || out.String("node") != a.node {
		t.Errorf("%s = ok %v %s %s, payload %s; want flashed 2.1 on %s", flash.ID, res.OK, res.ErrorKind, res.Error, res.Payload, a.node)
	}
	certKey(t, relay, res, a.node)

	id = ids.New(ids.Command)
	relay.Send(kinds.Command{ID: id, NodeID: a.node, Kind: flash.ID, Payload: json.RawMessage(`{"version":"later"}`)})
	if res := relay.WaitResult(t, id, 1); res.OK || res.ErrorKind != string(errs.Unavailable) {
		t.Errorf("%s not ready = ok %v %s, want UNAVAILABLE", flash.ID, res.OK, res.ErrorKind)
	}

	stock := agenttest.NewRelay(t)
	b := startAgent(t, stock, Config{}, "")
	id = ids.New(ids.Command)
	stock.Send(kinds.Command{ID: id, NodeID: b.node, Kind: flash.ID, Payload: json.RawMessage(`{}`)})
	if res := stock.WaitResult(t, id, 1); res.OK || res.ErrorKind != string(errs.Unsupported) || !strings.Contains(res.Error, kinds.DiskWipe) {
		t.Errorf("%s on a ramdisk without the plugin = ok %v %s %q, want UNSUPPORTED naming what it runs", flash.ID, res.OK, res.ErrorKind, res.Error)
	}
}

// TestPluginRamdiskStepWithoutRun: a plugin ramdisk step the ramdisk
// cannot run stops it before it joins, naming the step.
func TestPluginRamdiskStepWithoutRun(t *testing.T) {
	_, err := pluginSteps([]sdk.Plugin{{ID: "acme", Steps: []sdk.Step{{ID: "acme.flashFirmware", RunsOn: sdk.Ramdisk, Timeout: time.Minute}}}})
	if err == nil || !strings.Contains(err.Error(), "acme.flashFirmware has no Run") {
		t.Errorf("pluginSteps(a ramdisk step without Run) = %v, want an error naming it", err)
	}
}
