package workflows_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	wf "github.com/better-compute/better-compute/workflows"
)

func TestEnrollRunsTheRunbook(t *testing.T) {
	f := newFake("bcd", nodestate.Enrolling)
	res, err := run(t, f, wf.Enroll, wf.Input{})
	if err != nil {
		t.Fatalf("Enroll = %v", err)
	}
	wantCalls := []string{kinds.ActGetNode, kinds.BMCInspect, kinds.ActRecordFacts, kinds.ActTransition,
		kinds.ActIssueDiscovery, kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower,
		kinds.InventoryRefresh, kinds.ActRecordFacts, kinds.ActTransition,
		kinds.DiskWipe, kinds.ActVerifyWipe, kinds.PowerSetPower, kinds.BootClearEntry, kinds.ActTransition}
	if diff := cmp.Diff(wantCalls, f.calls); diff != "" {
		t.Errorf("Enroll activities (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wf.Result{State: nodestate.Ready, Attestation: &f.verified}, res); diff != "" {
		t.Errorf("Enroll result (-want +got):\n%s", diff)
	}
	if got := moves(f.transitions); got != "enrolling>inspecting inspecting>cleaning cleaning>ready" {
		t.Errorf("Enroll transitions = %s", got)
	}
	if diff := cmp.Diff([]string{"cycle", "off"}, f.power); diff != "" {
		t.Errorf("Enroll power actions (-want +got):\n%s", diff)
	}
	// Every command is recorded before it is sent and after, under its step.
	var steps []string
	for _, c := range f.commands {
		steps = append(steps, c.Step+":"+c.Status)
	}
	want := []string{}
	for i, k := range []string{kinds.BMCInspect, kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower,
		kinds.InventoryRefresh, kinds.DiskWipe, kinds.PowerSetPower, kinds.BootClearEntry} {
		step := fmt.Sprintf("%02d.%s", i+1, k)
		want = append(want, step+":", step+":succeeded")
	}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("Enroll command records (-want +got):\n%s", diff)
	}
	// A command's outcome goes with the next command's start when that
	// follows at once: the 8 commands' 16 records take 11 command.queue
	// local activities (the outcomes of bmc.inspect, inventory.refresh and
	// disk.wipe, followed by a control-plane activity, go alone; the end's
	// goes with the flush), and each of the 3 moves is preceded by a
	// command.flush of the commands sent since the last, as they ended.
	if f.recordCalls != 14 {
		t.Errorf("Enroll recorded its commands in %d local activities, want 14", f.recordCalls)
	}
	var flushed []string
	for _, fl := range f.flushes {
		var cmds []string
		for _, c := range fl.Commands {
			cmds = append(cmds, c.Step+":"+c.Status)
			if c.StartedAt.IsZero() || c.FinishedAt.Before(c.StartedAt) {
				t.Errorf("flushed %s started %v, finished %v", c.Step, c.StartedAt, c.FinishedAt)
			}
		}
		flushed = append(flushed, strings.Join(cmds, " "))
	}
	wantFlushed := []string{"01.bmc.inspect:succeeded",
		"02.boot.setEntry:succeeded 03.management.setBootDevice:succeeded 04.power.setPower:succeeded 05.inventory.refresh:succeeded",
		"06.disk.wipe:succeeded 07.power.setPower:succeeded 08.boot.clearEntry:succeeded"}
	if diff := cmp.Diff(wantFlushed, flushed); diff != "" {
		t.Errorf("Enroll's flushes before its moves (-want +got):\n%s", diff)
	}
	// The wipe is bound to this run: its command id is its step's, and the
	// verification asks for this workflow's nonce over the inventoried disks.
	wipe := f.ramdiskCmds[1]
	var wi kinds.WipeInput
	_ = json.Unmarshal(wipe.Payload, &wi)
	if wipe.Kind != kinds.DiskWipe || !strings.HasPrefix(wipe.ID, "metal/node_1/") || !strings.HasSuffix(wipe.ID, "/06") ||
		wi.Mode != "quick" || wi.Nonce == "" || f.verifyIn == nil || f.verifyIn.Nonce != wi.Nonce || f.verifyIn.WorkflowID != "metal/node_1" {
		t.Errorf("wipe command %+v (%+v), verified with %+v: want id metal/node_1/<run>/06, mode quick, the same nonce", wipe, wi, f.verifyIn)
	}
	if diff := cmp.Diff(f.disks, f.node.Disks); diff != "" {
		t.Errorf("recorded disks (-want +got):\n%s", diff)
	}
}

func TestDeployRunsTheProfile(t *testing.T) {
	f := newFake("bcd", nodestate.Ready)
	res, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1})
	if err != nil || res.State != nodestate.Deployed {
		t.Fatalf("Deploy = %+v, %v; want deployed", res, err)
	}
	wantCalls := []string{kinds.ActGetNode, kinds.ActGetProfile, kinds.ActGetImage, kinds.CacheEnsureImage, kinds.ActTransition,
		kinds.ActIssueDiscovery, kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower, kinds.DeployImage,
		kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.BootKexec, kinds.ActRecordDeployment, kinds.ActTransition}
	if diff := cmp.Diff(wantCalls, f.calls); diff != "" {
		t.Errorf("Deploy activities (-want +got):\n%s", diff)
	}
	var kx kinds.KexecInput
	_ = json.Unmarshal(f.ramdiskCmds[1].Payload, &kx)
	if kx.Disk != "wwn-0x1" {
		t.Errorf("boot.kexec disk = %q, want the disk deploy.image wrote (wwn-0x1)", kx.Disk)
	}
	want := []kinds.DeploymentInput{{TenantID: "acme", NodeID: "node_1", ProfileID: "os", ProfileVersion: 1, Role: "host"}}
	if diff := cmp.Diff(want, f.deployments); diff != "" {
		t.Errorf("recorded deployment (-want +got):\n%s", diff)
	}
}

// moves renders transitions as "from>to …".
func moves(ts []kinds.TransitionInput) string {
	var s []string
	for _, x := range ts {
		s = append(s, string(x.From)+">"+string(x.To))
	}
	return strings.Join(s, " ")
}

func unverified(format string, args ...any) error {
	return errs.New(errs.UnverifiedWipe, format, args...)
}

// ramdiskBoot is what setting up one ramdisk boot calls, up to its first
// command (here inventory.refresh).
var ramdiskBoot = []string{kinds.ActIssueDiscovery, kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower,
	kinds.InventoryRefresh}

func TestVerbOutcomes(t *testing.T) {
	cases := []struct {
		name      string
		agent     string
		state     nodestate.State
		verb      string
		in        wf.Input
		edit      func(*fake)
		wantKind  errs.Kind // "" for success
		wantMsg   string
		wantState nodestate.State
		// for failed: where from, and whether maintenance was turned on
		failedFrom  nodestate.State
		maintenance bool
		wantCalls   []string // nil: not checked
		refused     bool     // failed before it moved the node: node.recordRefusal says why
	}{
		{name: "unattested wipe fails the release into maintenance", agent: "bcd", state: nodestate.Deployed,
			verb: wf.Undeploy, in: wf.Input{Wipe: "quick"},
			edit:     func(f *fake) { f.fail[kinds.ActVerifyWipe] = unverified("read-back failed on wwn-0x2") },
			wantKind: errs.UnverifiedWipe, wantMsg: "read-back failed on wwn-0x2", wantState: nodestate.Failed,
			failedFrom: nodestate.Releasing, maintenance: true},
		{name: "wipe none without allowUnverifiedRelease is refused before anything moves", agent: "bcd", state: nodestate.Deployed,
			verb: wf.Undeploy, in: wf.Input{Wipe: "none"}, wantKind: errs.UnverifiedWipe, wantMsg: "allowUnverifiedRelease",
			wantState: nodestate.Deployed, wantCalls: []string{kinds.ActGetNode, kinds.ActRecordRefusal}, refused: true},
		{name: "a ramdisk boot that stalls is tried again", agent: "bcd", state: nodestate.Manageable, verb: wf.Provide,
			edit: func(f *fake) {
				f.fail[kinds.InventoryRefresh] = errs.New(errs.BootStalled, "stopped at \"armed\"")
				f.failTimes = map[string]int{kinds.InventoryRefresh: 2}
			},
			wantState: nodestate.Ready,
			wantCalls: append(append(append([]string{kinds.ActGetNode, kinds.ActTransition}, ramdiskBoot...), ramdiskBoot...),
				append(ramdiskBoot, kinds.ActRecordFacts, kinds.DiskWipe, kinds.ActVerifyWipe, kinds.PowerSetPower,
					kinds.BootClearEntry, kinds.ActTransition)...)},
		{name: "a ramdisk boot that stalls every time fails saying where", agent: "bcd", state: nodestate.Manageable, verb: wf.Provide,
			edit: func(f *fake) {
				f.fail[kinds.InventoryRefresh] = errs.New(errs.BootStalled, "stopped at \"armed\": check its boot order")
			},
			wantKind: errs.BootStalled, wantMsg: "3 ramdisk boots stalled; the last: stopped at \"armed\": check its boot order",
			wantState: nodestate.Failed, failedFrom: nodestate.Cleaning,
			wantCalls: append(append(append([]string{kinds.ActGetNode, kinds.ActTransition}, ramdiskBoot...), ramdiskBoot...),
				append(ramdiskBoot, kinds.ActTransition)...)},
		{name: "inspect from ready wipes before ready", agent: "bcd", state: nodestate.Ready, verb: wf.Inspect,
			wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.ActTransition, kinds.BMCInspect, kinds.ActRecordFacts, kinds.ActIssueDiscovery,
				kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower, kinds.InventoryRefresh,
				kinds.ActRecordFacts, kinds.ActTransition, kinds.DiskWipe, kinds.ActVerifyWipe, kinds.PowerSetPower,
				kinds.BootClearEntry, kinds.ActTransition}},
		{name: "inspect from manageable stays manageable, no wipe", agent: "bcd", state: nodestate.Manageable, verb: wf.Inspect,
			wantState: nodestate.Manageable,
			wantCalls: []string{kinds.ActGetNode, kinds.ActTransition, kinds.BMCInspect, kinds.ActRecordFacts, kinds.ActIssueDiscovery,
				kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower, kinds.InventoryRefresh,
				kinds.ActRecordFacts, kinds.PowerSetPower, kinds.BootClearEntry, kinds.ActTransition}},
		{name: "inspect on an agent none pool reads the BMC only", agent: "none", state: nodestate.Ready, verb: wf.Inspect,
			wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.ActTransition, kinds.BMCInspect, kinds.ActRecordFacts, kinds.ActTransition}},
		{name: "wipe none with allowUnverifiedRelease", agent: "bcd", state: nodestate.Deployed,
			verb: wf.Undeploy, in: wf.Input{Wipe: "none"}, edit: func(f *fake) { f.node.AllowUnverifiedRelease = true },
			wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.ActTransition, kinds.BootClearEntry, kinds.PowerSetPower,
				kinds.ActRecordDeployment, kinds.ActTransition}},
		{name: "attested release", agent: "bcd", state: nodestate.Deployed, verb: wf.Undeploy, in: wf.Input{Wipe: "secure-erase"},
			wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.ActTransition, kinds.BootClearEntry, kinds.ActIssueDiscovery, kinds.BootSetEntry,
				kinds.ManagementSetBootDevice, kinds.PowerSetPower, kinds.InventoryRefresh, kinds.ActRecordFacts, kinds.DiskWipe,
				kinds.ActVerifyWipe, kinds.PowerSetPower, kinds.BootClearEntry, kinds.ActRecordDeployment, kinds.ActTransition}},
		{name: "enroll on an agent none pool powers off", agent: "none", state: nodestate.Enrolling, verb: wf.Enroll,
			wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.BMCInspect, kinds.ActRecordFacts, kinds.ActTransition, kinds.PowerSetPower, kinds.ActTransition}},
		{name: "rescue on an agent none pool", agent: "none", state: nodestate.Deployed, verb: wf.Rescue,
			wantKind: errs.Unsupported, wantMsg: "agent: none", wantState: nodestate.Failed, failedFrom: nodestate.Rescuing},
		{name: "deploy with a step no one knows", agent: "bcd", state: nodestate.Ready, verb: wf.Deploy,
			in:       wf.Input{ProfileID: "os", ProfileVersion: 1},
			edit:     func(f *fake) { f.profile.Steps = []kinds.ProfileStep{{Use: "ansible.run"}} },
			wantKind: errs.InvalidInput, wantMsg: `unknown step "ansible.run"`, wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.ActGetProfile, kinds.ActRecordRefusal}, refused: true},
		{name: "deploy whose image source is gone is refused before the node moves", agent: "bcd", state: nodestate.Ready, verb: wf.Deploy,
			in: wf.Input{ProfileID: "os", ProfileVersion: 1},
			edit: func(f *fake) {
				f.fail[kinds.CacheEnsureImage] = errs.New(errs.InvalidInput, "image img_1's source http://mirror/x.img answered HTTP 404 Not Found")
			},
			wantKind: errs.InvalidInput, wantMsg: "INVALID_INPUT: image img_1's source", wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.ActGetProfile, kinds.ActGetImage, kinds.CacheEnsureImage, kinds.ActRecordRefusal}, refused: true},
		{name: "deploy whose image source does not answer is refused once its tries run out", agent: "bcd", state: nodestate.Ready, verb: wf.Deploy,
			in: wf.Input{ProfileID: "os", ProfileVersion: 1},
			edit: func(f *fake) {
				f.fail[kinds.CacheEnsureImage] = errs.New(errs.DriverError, "cannot fetch image img_1 from http://mirror/x.img: connection refused")
			},
			wantKind: errs.DriverError, wantMsg: "connection refused", wantState: nodestate.Ready, refused: true},
		{name: "boot.kexec before deploy.image", agent: "bcd", state: nodestate.Ready, verb: wf.Deploy,
			in:       wf.Input{ProfileID: "os", ProfileVersion: 1},
			edit:     func(f *fake) { f.profile.Steps = []kinds.ProfileStep{{Use: kinds.BootKexec}} },
			wantKind: errs.InvalidInput, wantMsg: "needs a deploy.image before it", wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode, kinds.ActGetProfile, kinds.ActRecordRefusal}, refused: true},
		{name: "a verb from a state that does not allow it", agent: "bcd", state: nodestate.Ready, verb: wf.Undeploy,
			in: wf.Input{Wipe: "quick"}, wantKind: errs.InvalidState, wantMsg: "this node is ready", wantState: nodestate.Ready,
			wantCalls: []string{kinds.ActGetNode}},
		{name: "enroll runs once", agent: "bcd", state: nodestate.Ready, verb: wf.Enroll,
			wantKind: errs.InvalidState, wantState: nodestate.Ready, wantCalls: []string{kinds.ActGetNode}},
		{name: "power keeps the state", agent: "bcd", state: nodestate.Deployed, verb: wf.Power, in: wf.Input{Action: "on"},
			wantState: nodestate.Deployed, wantCalls: []string{kinds.ActGetNode, kinds.PowerSetPower}},
		{name: "retire revokes the identity", agent: "bcd", state: nodestate.Ready, verb: wf.Retire, wantState: nodestate.Retired,
			wantCalls: []string{kinds.ActGetNode, kinds.ActTransition, kinds.ActIssueDiscovery, kinds.BootSetEntry,
				kinds.ManagementSetBootDevice, kinds.PowerSetPower, kinds.InventoryRefresh, kinds.ActRecordFacts, kinds.DiskWipe,
				kinds.ActVerifyWipe, kinds.PowerSetPower, kinds.BootClearEntry, kinds.ActRevokeIdentity, kinds.ActTransition}},
		{name: "a failing BMC fails the enroll", agent: "bcd", state: nodestate.Enrolling, verb: wf.Enroll,
			edit:     func(f *fake) { f.fail[kinds.BMCInspect] = errs.New(errs.InvalidInput, "BMC refused the credentials") },
			wantKind: errs.InvalidInput, wantMsg: "refused the credentials", wantState: nodestate.Failed, failedFrom: nodestate.Enrolling,
			wantCalls: []string{kinds.ActGetNode, kinds.BMCInspect, kinds.ActTransition}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(tc.agent, tc.state)
			if tc.edit != nil {
				tc.edit(f)
			}
			res, err := run(t, f, tc.verb, tc.in)
			if got := errs.FromTemporal(err); err == nil && tc.wantKind != "" || err != nil && got != tc.wantKind {
				t.Fatalf("%s = %v (kind %q), want kind %q", tc.verb, err, got, tc.wantKind)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("%s = %v, want it to mention %q", tc.verb, err, tc.wantMsg)
			}
			if err == nil && res.State != tc.wantState {
				t.Errorf("%s result state = %s, want %s", tc.verb, res.State, tc.wantState)
			}
			if f.node.State != tc.wantState {
				t.Errorf("%s left the node %s, want %s (moves: %s)", tc.verb, f.node.State, tc.wantState, moves(f.transitions))
			}
			if tc.failedFrom != "" {
				last := f.transitions[len(f.transitions)-1]
				if last.From != tc.failedFrom || last.Maintenance != tc.maintenance || !strings.Contains(last.Error, tc.wantMsg) {
					t.Errorf("move to failed = %+v, want from %s, maintenance %v, error mentioning %q", last, tc.failedFrom, tc.maintenance, tc.wantMsg)
				}
			}
			// A verb that fails before it moves the node says why on the node.
			if tc.refused && (len(f.refusals) != 1 || f.refusals[0].State != tc.wantState ||
				!strings.Contains(f.refusals[0].Error, tc.wantMsg) || !strings.Contains(f.refusals[0].Error, "left the node "+string(tc.wantState))) {
				t.Errorf("%s recorded refusals %+v, want one on the %s node naming %q", tc.verb, f.refusals, tc.wantState, tc.wantMsg)
			}
			if tc.wantCalls != nil {
				if diff := cmp.Diff(tc.wantCalls, f.calls); diff != "" {
					t.Errorf("%s activities (-want +got):\n%s", tc.verb, diff)
				}
			}
			if tc.agent == "none" {
				if got := ramdiskCalls(f.calls); len(got) > 0 {
					t.Errorf("%s on an agent none pool sent ramdisk kinds %v", tc.verb, got)
				}
			}
		})
	}
}

// TestAbortFailsTheNodeWithTheReason: metal.abort signals the reason and
// cancels; the workflow moves the node to failed from where it was.
func TestAbortFailsTheNodeWithTheReason(t *testing.T) {
	f, err := abortDeployDuring(t, kinds.DeployImage, kinds.Result{OK: true})
	if !temporal.IsCanceledError(err) {
		t.Fatalf("aborted Deploy = %v, want a cancellation", err)
	}
	want := kinds.TransitionInput{TenantID: "acme", NodeID: "node_1", From: nodestate.Deploying, To: nodestate.Failed,
		Error: "aborted: wrong image"}
	if diff := cmp.Diff(want, f.transitions[len(f.transitions)-1]); diff != "" {
		t.Errorf("move after abort (-want +got):\n%s", diff)
	}
	if f.node.State != nodestate.Failed {
		t.Errorf("node after abort = %s, want failed", f.node.State)
	}
	// The machine is left safe before the node fails: off, no ramdisk boot
	// entry, next boot from disk. Before, it stayed on with PXE set.
	tail := f.calls[len(f.calls)-4:]
	if diff := cmp.Diff([]string{kinds.PowerSetPower, kinds.BootClearEntry, kinds.ManagementSetBootDevice, kinds.ActTransition}, tail); diff != "" {
		t.Errorf("activities after abort (-want +got):\n%s", diff)
	}
	if got := f.power[len(f.power)-1]; got != "off" {
		t.Errorf("last power action after abort = %s, want off", got)
	}
	// The command the abort cut short is recorded as aborted, not INTERNAL.
	for _, c := range f.commands {
		if c.Kind == kinds.DeployImage && c.Status != "" && (c.Status != kinds.CommandAborted || c.ErrorKind != "") {
			t.Errorf("deploy.image record after abort = %s %s, want aborted with no error kind", c.Status, c.ErrorKind)
		}
	}
}

// abortDeployDuring deploys a ready node whose activity kind takes an hour
// (then returning out), and aborts it a minute in: "wrong image".
func abortDeployDuring(t *testing.T, kind string, out any) (*fake, error) {
	f := newFake("bcd", nodestate.Ready)
	_, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1}, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(kind, mock.Anything, mock.Anything).After(time.Hour).Return(out, nil)
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(wf.AbortSignal, "wrong image")
			env.CancelWorkflow()
		}, time.Minute)
	})
	return f, err
}

// TestAbortWhileTheImageIsFetched: metal.abort while the deploy pins its
// image at the site, before the node moved, leaves the node ready with the
// reason, and sends the machine nothing: it was never touched.
func TestAbortWhileTheImageIsFetched(t *testing.T) {
	f, err := abortDeployDuring(t, kinds.CacheEnsureImage, kinds.EnsureImageOutput{})
	if !temporal.IsCanceledError(err) {
		t.Fatalf("aborted Deploy = %v, want a cancellation", err)
	}
	want := []kinds.RefusalInput{{TenantID: "acme", NodeID: "node_1", State: nodestate.Ready,
		Error: "deploy failed and left the node ready: aborted: wrong image"}}
	if diff := cmp.Diff(want, f.refusals); diff != "" || f.node.State != nodestate.Ready || len(f.transitions) != 0 {
		t.Errorf("after the abort the node is %s, moves %s, refusals (-want +got):\n%s", f.node.State, moves(f.transitions), diff)
	}
	if diff := cmp.Diff([]string{kinds.ActGetNode, kinds.ActGetProfile, kinds.ActGetImage, kinds.ActRecordRefusal}, f.calls); diff != "" {
		t.Errorf("activities (-want +got):\n%s", diff)
	}
}

// TestLastErrorIsOneCleanLine: a failed node's lastError, and the failed
// command's error in the command log, are the failing step's kind and
// message, one line an operator can act on, without Temporal's wrapping
// around it. Before, the command log kept the wrapping ("activity error
// (type: wipe.verify, scheduledEventID: …, identity: …): …").
func TestLastErrorIsOneCleanLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		state nodestate.State
		verb  string
		in    wf.Input
		edit  func(f *fake)
		want  string
		cmd   string // each failed command's error in the log ("": none fails)
	}{
		{"an activity's error", nodestate.Deployed, wf.Undeploy, wf.Input{Wipe: "quick"},
			func(f *fake) { f.fail[kinds.ActVerifyWipe] = unverified("read-back failed on wwn-0x2") },
			"wipe.verify: UNVERIFIED_WIPE: read-back failed on wwn-0x2", ""},
		{"an activity's timeout", nodestate.Deployed, wf.Undeploy, wf.Input{Wipe: "quick"},
			func(f *fake) {
				f.fail[kinds.DiskWipe] = temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			},
			"disk.wipe: timed out: its worker sent no heartbeat in time (the site agent, or its ramdisk, stopped?)",
			"disk.wipe: timed out: its worker sent no heartbeat in time (the site agent, or its ramdisk, stopped?)"},
		{"the workflow's own error", nodestate.Manageable, wf.Provide, wf.Input{},
			func(f *fake) { f.fail[kinds.InventoryRefresh] = errs.New(errs.BootStalled, "stopped at \"armed\"") },
			"BOOT_STALLED: 3 ramdisk boots stalled; the last: stopped at \"armed\"",
			"inventory.refresh: BOOT_STALLED: stopped at \"armed\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake("bcd", tc.state)
			tc.edit(f)
			if _, err := run(t, f, tc.verb, tc.in); err == nil {
				t.Fatalf("%s succeeded, want it to fail", tc.verb)
			}
			last := f.transitions[len(f.transitions)-1]
			if last.To != nodestate.Failed || last.Error != tc.want {
				t.Errorf("move to failed = %s with %q, want failed with %q", last.To, last.Error, tc.want)
			}
			for _, c := range f.commands {
				if c.Status == kinds.CommandFailed && c.Error != tc.cmd {
					t.Errorf("failed command %s in the log = %q, want %q", c.Kind, c.Error, tc.cmd)
				}
			}
		})
	}
}

// TestRetireANodeWithoutMAC: a node that never got a MAC (its enroll failed
// at the BMC) retires without a ramdisk or a wipe - nothing of ours ever
// booted on it - powering it off if its BMC lets it and saying what it
// skipped. Before, it failed with "boot.setEntry: INVALID_INPUT macs".
func TestRetireANodeWithoutMAC(t *testing.T) {
	for _, tc := range []struct {
		name     string
		powerErr error
		want     string
	}{
		{"BMC answers", nil, "retired without a wipe: the node never got a MAC, so no ramdisk of ours booted on it"},
		{"wrong password", errs.New(errs.Unauthenticated, "BMC 10.0.0.5 refused the login"),
			"retired without a wipe: the node never got a MAC, so no ramdisk of ours booted on it; not powered off: power.setPower: UNAUTHENTICATED: BMC 10.0.0.5 refused the login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake("bcd", nodestate.Failed)
			f.node.MACs = nil
			if tc.powerErr != nil {
				f.fail[kinds.PowerSetPower] = tc.powerErr
			}
			res, err := run(t, f, wf.Retire, wf.Input{})
			if err != nil || res.State != nodestate.Retired {
				t.Fatalf("Retire = %+v, %v; want retired", res, err)
			}
			want := []string{kinds.ActGetNode, kinds.ActTransition, kinds.PowerSetPower, kinds.BootClearEntry, kinds.ActRevokeIdentity, kinds.ActTransition}
			if diff := cmp.Diff(want, f.calls); diff != "" {
				t.Errorf("Retire activities (-want +got):\n%s", diff)
			}
			if last := f.transitions[len(f.transitions)-1]; last.To != nodestate.Retired || last.Error != tc.want {
				t.Errorf("last move = %s %q, want retired %q", last.To, last.Error, tc.want)
			}
		})
	}
}

// TestRecoverANodeWithoutMAC: recover of a node that failed before its BMC
// told its MACs asks the BMC again first, then commissions as usual.
func TestRecoverANodeWithoutMAC(t *testing.T) {
	f := newFake("bcd", nodestate.Failed)
	f.node.MACs = nil
	res, err := run(t, f, wf.Recover, wf.Input{})
	if err != nil || res.State != nodestate.Ready {
		t.Fatalf("Recover = %+v, %v; want ready", res, err)
	}
	if len(f.calls) < 3 || f.calls[1] != kinds.BMCInspect || f.calls[2] != kinds.ActRecordFacts {
		t.Errorf("Recover activities = %v, want bmc.inspect and node.recordFacts first", f.calls)
	}
	entry := f.inputs[kinds.BootSetEntry][0].(kinds.BootEntry)
	if len(entry.MACs) != 1 {
		t.Errorf("boot entry MACs = %v, want the one the BMC reported", entry.MACs)
	}
}
