//go:build fakehw

package demo_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/better-compute/better-compute/demo"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	wf "github.com/better-compute/better-compute/workflows"
)

func asConnect(err error, target **connect.Error) bool { return errors.As(err, target) }

// The commands of each verb, in order: what the machine sees.
var (
	enrollKinds = []string{"bmc.inspect", "boot.setEntry", "management.setBootDevice", "power.setPower",
		"inventory.refresh", "disk.wipe", "power.setPower", "boot.clearEntry"}
	deployKinds = []string{"cache.ensureImage", "boot.setEntry", "management.setBootDevice", "power.setPower",
		"deploy.image", "boot.setEntry", "management.setBootDevice", "boot.kexec"}
	undeployKinds = []string{"boot.clearEntry", "boot.setEntry", "management.setBootDevice", "power.setPower",
		"inventory.refresh", "disk.wipe", "power.setPower", "boot.clearEntry"}
)

// What the machine itself received, written out rather than derived from
// the command log above, which the workflow writes about itself: the
// requests that changed the machine as its emulated Redfish BMC accepted
// them ("power:<ResetType>", "boot:<Target>/<Enabled>"), and the commands
// its ramdisk ran. The driver turns a power cycle of a machine that is off
// into On, of one that is on into PowerCycle, and off into ForceOff.
var (
	enrollBMC = []string{
		"boot:Pxe/Once", "power:On", // bootRamdisk: the machine is off
		"power:ForceOff", // shutDown
	}
	deployBMC = []string{
		"boot:Pxe/Once", "power:On", // bootRamdisk: off since enrollment
		"boot:Hdd/Continuous", // bootLocal, then boot.kexec (no BMC call)
	}
	undeployBMC = []string{
		"boot:Pxe/Once", "power:PowerCycle", // bootRamdisk: the deployed OS runs
		"power:ForceOff", // shutDown
	}
	enrollRamdisk   = []string{"inventory.refresh", "disk.wipe"}
	deployRamdisk   = []string{"deploy.image", "boot.kexec"}
	undeployRamdisk = []string{"inventory.refresh", "disk.wipe"}
)

// TestLifecycleCommands asserts the exact commands a machine is sent from
// enrollment to ready, through deploy, and through undeploy, and what
// `workflows list` and the Temporal history show of it.
func TestLifecycleCommands(t *testing.T) {
	d := start(t, 1)
	m := d.Rack.Machines()[0]
	id, err := d.Loop(ctxFor(t, 3*time.Minute), m)
	if err != nil {
		t.Fatalf("Loop(%s) = %v", m.Name, err)
	}
	var kinds, runsOn []string
	for _, c := range commands(t, d, id) {
		kinds = append(kinds, c.Kind)
		runsOn = append(runsOn, c.RunsOn)
		if c.Status != "succeeded" || c.Attempt < 1 || c.FinishedAt == nil {
			t.Errorf("command %s %s = status %s attempt %d, want succeeded and finished", c.Step, c.Kind, c.Status, c.Attempt)
		}
	}
	want := concat(enrollKinds, deployKinds, undeployKinds)
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("commands list --node (-want +got):\n%s", diff)
	}
	for i, k := range kinds {
		wantOn := "site"
		if k == "inventory.refresh" || k == "disk.wipe" || k == "deploy.image" || k == "boot.kexec" {
			wantOn = "ramdisk"
		}
		if runsOn[i] != wantOn {
			t.Errorf("command %d %s runsOn = %s, want %s", i, k, runsOn[i], wantOn)
		}
	}
	n := node(t, d, id)
	if n.State != "ready" || n.ProfileId != "" || len(n.Disks) != 2 || len(n.Macs) == 0 {
		t.Errorf("node after the loop = state %s profile %q disks %v macs %v", n.State, n.ProfileId, n.Disks, n.Macs)
	}
	st, _ := d.Rack.State(m.Name)
	if st.RamdiskBoots != 3 || st.Power != "off" {
		t.Errorf("machine after the loop = %+v, want 3 ramdisk boots and power off", st)
	}
	if diff := cmp.Diff(concat(enrollBMC, deployBMC, undeployBMC), st.BMCCalls); diff != "" {
		t.Errorf("what the BMC received, Rack.State(%s).BMCCalls (-want +got):\n%s", m.Name, diff)
	}
	if diff := cmp.Diff(concat(enrollRamdisk, deployRamdisk, undeployRamdisk), st.RamdiskRan); diff != "" {
		t.Errorf("what the ramdisk ran, Rack.State(%s).RamdiskRan (-want +got):\n%s", m.Name, diff)
	}
	// workflows list shows the machine's life by profile id (visibility is
	// eventually consistent: poll).
	var profiles []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r, err := d.API.Workflows.List(context.Background(), connect.NewRequest(&v1.ListWorkflowsRequest{NodeId: id}))
		if err != nil {
			t.Fatal(err)
		}
		profiles = profiles[:0]
		for _, w := range r.Msg.Items {
			profiles = append(profiles, w.ProfileId)
		}
		if len(profiles) == 3 {
			break
		}
	}
	if diff := cmp.Diff([]string{wf.ProfileEnroll, demoProfile, wf.ProfileRelease}, profiles); diff != "" {
		t.Errorf("workflows list profileIds (-want +got):\n%s", diff)
	}
	// No discovery token ever sits in Temporal's history in clear.
	st, _ = d.Rack.State(m.Name)
	for _, run := range runs(t, d, id) {
		for _, ev := range run {
			if b, _ := ev.Marshal(); containsAny(string(b), st.Tokens) {
				t.Fatalf("a discovery token is in clear in Temporal history event %d (%s)", ev.EventId, ev.EventType)
			}
		}
	}
}

const demoProfile = "demo-os"

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// runs returns the raw history of every run of the node's workflow.
func runs(t *testing.T, d *demo.Demo, id string) [][]*historypb.HistoryEvent {
	t.Helper()
	c := d.CP.Client()
	var out [][]*historypb.HistoryEvent
	for _, w := range workflowRuns(t, d, id) {
		iter := c.GetWorkflowHistory(context.Background(), w.WorkflowId, w.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var events []*historypb.HistoryEvent
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
		}
		out = append(out, events)
	}
	return out
}

func workflowRuns(t *testing.T, d *demo.Demo, id string) []*v1.Workflow {
	t.Helper()
	r, err := d.API.Workflows.List(context.Background(), connect.NewRequest(&v1.ListWorkflowsRequest{NodeId: id}))
	if err != nil {
		t.Fatal(err)
	}
	return r.Msg.Items
}

var _ = fmt.Sprint
