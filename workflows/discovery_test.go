package workflows_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	wf "github.com/better-compute/better-compute/workflows"
)

const (
	pxeUUID = "8f2c6a2e-0000-4000-8000-0000000000aa"
	pxeMAC  = "52:54:00:00:00:aa"
)

// discovery is the control plane's side of PXE discovery around a fake:
// the candidate the store finds, what the workflow asked of it, and an
// inventory whose identity the test chooses.
type discovery struct {
	f         *fake
	candidate kinds.Candidate
	uuid      string    // the ramdisk's product UUID in inventory.refresh
	nics      []string  // its NICs' MACs
	since     time.Time // when the wait began, as discovery.beginWait says
	// What the workflow asked, by activity.
	begun, searched, awaited, taken, ended, forgot []kinds.MACWaitInput
}

// ipmiFake is a node enrolled by product UUID only, whose BMC reports no
// MAC, on a pool that trusts its provisioning network or not.
func ipmiFake(trust bool) (*fake, *discovery) {
	f := newFake("bcd", nodestate.Enrolling)
	f.node.MACs, f.node.ProductUUID, f.node.TrustProvisioningNetwork = nil, pxeUUID, trust
	d := &discovery{f: f, candidate: kinds.Candidate{Found: true, MAC: pxeMAC, ClientUUID: pxeUUID, Arch: "EFI x86-64"},
		uuid: pxeUUID, nics: []string{"52:54:00:00:00:ab", pxeMAC}, since: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	return f, d
}

// register registers the discovery activities and replaces the fake's BMC
// (no MACs) and ramdisk inventory (with the machine's identity).
func (d *discovery) register(env *testsuite.TestWorkflowEnvironment) {
	f := d.f
	reg := func(name string, fn any) {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name, DisableAlreadyRegisteredCheck: true})
	}
	rec := func(list *[]kinds.MACWaitInput) func(kinds.MACWaitInput) (none, error) {
		return func(in kinds.MACWaitInput) (none, error) { *list = append(*list, in); return none{}, nil }
	}
	reg(kinds.ActBeginMACWait, act(f, kinds.ActBeginMACWait, func(in kinds.MACWaitInput) (time.Time, error) {
		d.begun = append(d.begun, in)
		return d.since, nil
	}))
	reg(kinds.ActFindCandidate, act(f, kinds.ActFindCandidate, func(in kinds.MACWaitInput) (kinds.Candidate, error) {
		d.searched = append(d.searched, in)
		return d.candidate, nil
	}))
	reg(kinds.ActAwaitConfirmation, act(f, kinds.ActAwaitConfirmation, rec(&d.awaited)))
	reg(kinds.ActEndMACWait, act(f, kinds.ActEndMACWait, rec(&d.ended)))
	reg(kinds.ActForgetMAC, act(f, kinds.ActForgetMAC, func(in kinds.MACWaitInput) (none, error) {
		d.forgot, f.node.MACs = append(d.forgot, in), nil
		return none{}, nil
	}))
	reg(kinds.ActTakeCandidate, act(f, kinds.ActTakeCandidate, func(in kinds.MACWaitInput) ([]string, error) {
		d.taken, f.node.MACs = append(d.taken, in), []string{in.MAC}
		return f.node.MACs, nil
	}))
	reg(kinds.BMCInspect, act(f, kinds.BMCInspect, func(kinds.InspectInput) (kinds.InspectOutput, error) {
		return kinds.InspectOutput{}, nil
	}))
	reg(kinds.InventoryRefresh, act(f, kinds.InventoryRefresh, d.inventory))
}

// inventory answers inventory.refresh with the disks and the identity.
func (d *discovery) inventory(cmd kinds.Command) (kinds.Result, error) {
	d.f.ramdiskCmds = append(d.f.ramdiskCmds, cmd)
	inv := map[string]any{"productUuid": d.uuid, "disks": []map[string]string{{"name": "wwn-0x1"}, {"name": "wwn-0x2"}}}
	var nics []map[string]string
	for _, m := range d.nics {
		nics = append(nics, map[string]string{"name": "eth", "mac": m})
	}
	inv["nics"] = nics
	b, _ := json.Marshal(inv)
	return kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: true, Payload: b}, nil
}

// after returns the calls that follow the first call of name.
func after(calls []string, name string) []string {
	i := slices.Index(calls, name)
	if i < 0 {
		return nil
	}
	return calls[i+1:]
}

// TestEnsureRamdiskWaitsForConfirmation: a node enrolled by product UUID,
// whose BMC reports no MAC, is power-cycled into PXE with no boot entry;
// its candidate is recorded and nothing more is sent until an operator
// confirms a MAC, which then gets the boot entry; the node reaches ready.
func TestEnsureRamdiskWaitsForConfirmation(t *testing.T) {
	f, d := ipmiFake(false)
	var atConfirm []string
	confirmAt := 3 * time.Hour
	res, err := run(t, f, wf.Enroll, wf.Input{}, d.register, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			atConfirm = slices.Clone(f.calls)
			f.node.MACs = []string{pxeMAC} // what metal.confirmMac does in the store
			f.mu.Unlock()
			env.SignalWorkflow(wf.MACConfirmedSignal, pxeMAC)
		}, confirmAt)
	})
	if err != nil || res.State != nodestate.Ready {
		t.Fatalf("Enroll = %+v, %v; want ready", res, err)
	}
	wantUntilCandidate := []string{kinds.ActGetNode, kinds.BMCInspect, kinds.ActRecordFacts, kinds.ActTransition,
		kinds.ActBeginMACWait, kinds.BootClearEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower,
		kinds.ActFindCandidate, kinds.ActAwaitConfirmation}
	if diff := cmp.Diff(wantUntilCandidate, atConfirm[:min(len(atConfirm), len(wantUntilCandidate))]); diff != "" {
		t.Errorf("activities until the candidate (-want +got):\n%s", diff)
	}
	// Waiting, the workflow only reads the node: 1, 2, 4 … 64 minutes, then
	// hourly; 7 reads in the first 3 hours.
	polls := atConfirm[len(wantUntilCandidate):]
	if want := slices.Repeat([]string{kinds.ActGetNode}, 7); !cmp.Equal(want, polls) {
		t.Errorf("activities while waiting for the confirmation = %v, want %v", polls, want)
	}
	wantAfter := []string{kinds.ActGetNode, kinds.ActIssueDiscovery, kinds.BootSetEntry, kinds.ManagementSetBootDevice,
		kinds.PowerSetPower, kinds.InventoryRefresh, kinds.ActRecordFacts, kinds.ActTransition, kinds.DiskWipe, kinds.ActVerifyWipe,
		kinds.PowerSetPower, kinds.BootClearEntry, kinds.ActTransition}
	if diff := cmp.Diff(wantAfter, f.calls[len(atConfirm):]); diff != "" {
		t.Errorf("activities after the confirmation (-want +got):\n%s", diff)
	}
	var entry kinds.BootEntry
	for _, in := range f.inputs[kinds.BootSetEntry] {
		entry = in.(kinds.BootEntry)
	}
	if !cmp.Equal(entry.MACs, []string{pxeMAC}) || !entry.Ramdisk {
		t.Errorf("boot entry = %+v, want the ramdisk for the confirmed MAC %s", entry, pxeMAC)
	}
	want := kinds.MACWaitInput{TenantID: "acme", NodeID: "node_1", SiteID: "site_1", ProductUUID: pxeUUID,
		Since: d.since, Deadline: d.since.Add(wf.DiscoveryWindow), MAC: pxeMAC}
	if diff := cmp.Diff([]kinds.MACWaitInput{want}, d.awaited); diff != "" {
		t.Errorf("discovery.awaitConfirmation input (-want +got):\n%s", diff)
	}
	if len(d.taken)+len(d.ended)+len(d.forgot) != 0 {
		t.Errorf("taken %v, ended %v, forgot %v: want none on a confirmed wait", d.taken, d.ended, d.forgot)
	}
	if got := f.power; !cmp.Equal(got, []string{"cycle", "cycle", "off"}) {
		t.Errorf("power actions = %v, want cycle (into PXE, no entry), cycle (ramdisk), off", got)
	}
}

// TestEnsureRamdiskTrustsProvisioningNetwork: on a pool that trusts its
// provisioning network, the candidate is taken at once and the ramdisk's
// UUID and NICs are checked against it; a machine that is not the node's
// fails the node before anything is written, and the node forgets the MAC.
func TestEnsureRamdiskTrustsProvisioningNetwork(t *testing.T) {
	cases := []struct {
		name    string
		uuid    string
		nics    []string
		wantErr string
	}{
		{"the node's machine", pxeUUID, []string{pxeMAC}, ""},
		{"UUID in the other byte order", "2e6a2c8f-0000-0040-8000-0000000000aa", []string{pxeMAC}, ""},
		{"another machine's UUID", "11111111-0000-4000-8000-0000000000aa", []string{pxeMAC}, "reports product UUID"},
		{"no UUID", "", []string{pxeMAC}, "reports product UUID"},
		{"the MAC is not among its NICs", pxeUUID, []string{"52:54:00:00:00:ab"}, "without " + pxeMAC},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, d := ipmiFake(true)
			d.uuid, d.nics = tc.uuid, tc.nics
			res, err := run(t, f, wf.Enroll, wf.Input{}, d.register)
			if len(d.taken) != 1 || d.taken[0].MAC != pxeMAC || len(d.awaited) != 0 {
				t.Errorf("taken %+v, awaited %+v; want %s taken at once, no confirmation", d.taken, d.awaited, pxeMAC)
			}
			if tc.wantErr == "" {
				if err != nil || res.State != nodestate.Ready || !cmp.Equal(f.node.MACs, []string{pxeMAC}) {
					t.Fatalf("Enroll = %+v, %v, MACs %v; want ready with %s", res, err, f.node.MACs, pxeMAC)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errs.FromTemporal(err) != errs.InvalidState {
				t.Fatalf("Enroll = %v, want INVALID_STATE saying %q", err, tc.wantErr)
			}
			last := f.transitions[len(f.transitions)-1]
			if f.node.State != nodestate.Failed || last.From != nodestate.Inspecting || !strings.Contains(last.Error, tc.wantErr) {
				t.Errorf("node = %s, last move %+v; want failed from inspecting with the error", f.node.State, last)
			}
			if slices.Contains(f.calls, kinds.DiskWipe) || len(f.inputs[kinds.ActRecordFacts]) != 1 {
				t.Errorf("activities %v: want no disk.wipe and no inventory recorded", f.calls)
			}
			if len(d.forgot) != 1 || d.forgot[0].MAC != pxeMAC || len(f.node.MACs) != 0 {
				t.Errorf("forgot %+v, node MACs %v; want %s forgotten", d.forgot, f.node.MACs, pxeMAC)
			}
		})
	}
}

// TestEnsureRamdiskGivesUp: no MAC under the UUID within the window, or an
// abort while waiting for the confirmation, fails the node with what to do
// and ends its wait; a node with neither a MAC nor a UUID is refused.
func TestEnsureRamdiskGivesUp(t *testing.T) {
	t.Run("nothing seen", func(t *testing.T) {
		f, d := ipmiFake(false)
		d.candidate = kinds.Candidate{}
		_, err := run(t, f, wf.Enroll, wf.Input{}, d.register)
		if err == nil || !strings.Contains(err.Error(), "no machine PXE-booted under product UUID "+pxeUUID) {
			t.Fatalf("Enroll = %v, want the window's failure", err)
		}
		if len(d.ended) != 1 || f.node.State != nodestate.Failed || slices.Contains(f.calls, kinds.BootSetEntry) {
			t.Errorf("ended %v, node %s, calls %v; want the wait ended, failed, no boot entry", d.ended, f.node.State, f.calls)
		}
	})
	t.Run("aborted", func(t *testing.T) {
		f, d := ipmiFake(false)
		_, err := run(t, f, wf.Enroll, wf.Input{}, d.register, func(env *testsuite.TestWorkflowEnvironment) {
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(wf.AbortSignal, "wrong machine")
				env.CancelWorkflow()
			}, 90*time.Minute)
		})
		if !temporal.IsCanceledError(err) {
			t.Fatalf("aborted Enroll = %v, want a cancellation", err)
		}
		last := f.transitions[len(f.transitions)-1]
		if len(d.ended) != 1 || last.Error != "aborted: wrong machine" || f.node.State != nodestate.Failed {
			t.Errorf("ended %v, last move %+v; want the wait ended and the node failed with the reason", d.ended, last)
		}
	})
	t.Run("no UUID", func(t *testing.T) {
		f, d := ipmiFake(false)
		f.node.ProductUUID = ""
		_, err := run(t, f, wf.Enroll, wf.Input{}, d.register)
		if errs.FromTemporal(err) != errs.Unsupported || !strings.Contains(err.Error(), "--product-uuid") {
			t.Fatalf("Enroll = %v, want UNSUPPORTED naming --product-uuid", err)
		}
		if slices.Contains(f.calls, kinds.ActBeginMACWait) {
			t.Errorf("calls %v: want no discovery for a node without a UUID", f.calls)
		}
	})
}
