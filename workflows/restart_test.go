package workflows_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
	wf "github.com/better-compute/better-compute/workflows"
)

// restarted is what the site says of a command whose ramdisk restarted
// with its boot's token spent.
var restarted = errs.New(errs.BootStalled, "the ramdisk of node_1 restarted while running a command; boot it again with a fresh token")

// commandIDs are the ids of every kind command sent, failed ones included.
func commandIDs(f *fake, kind string) []string {
	var ids []string
	for _, in := range f.inputs[kind] {
		ids = append(ids, in.(kinds.Command).ID)
	}
	return ids
}

// TestUndeployBootsAgainWhenTheRamdiskRestartsMidWipe: a ramdisk that dies
// mid-wipe (its machine PXE-booted again with the spent token: BOOT_STALLED
// from the site) is booted again with a fresh token and the wipe resent as a
// new command; the release ends ready with one attested wipe.
func TestUndeployBootsAgainWhenTheRamdiskRestartsMidWipe(t *testing.T) {
	f := newFake("bcd", nodestate.Deployed)
	f.fail[kinds.DiskWipe] = restarted
	f.failTimes = map[string]int{kinds.DiskWipe: 1}
	res, err := run(t, f, wf.Undeploy, wf.Input{Wipe: "quick"})
	if err != nil || res.State != nodestate.Ready || res.Attestation == nil {
		t.Fatalf("Undeploy = %+v, %v; want ready with an attestation", res, err)
	}
	boot := []string{kinds.ActIssueDiscovery, kinds.BootSetEntry, kinds.ManagementSetBootDevice, kinds.PowerSetPower}
	want := append([]string{kinds.ActGetNode, kinds.ActTransition, kinds.BootClearEntry}, boot...)
	want = append(append(append(want, kinds.InventoryRefresh, kinds.ActRecordFacts, kinds.DiskWipe), boot...),
		kinds.DiskWipe, kinds.ActVerifyWipe, kinds.PowerSetPower, kinds.BootClearEntry, kinds.ActRecordDeployment, kinds.ActTransition)
	if diff := cmp.Diff(want, f.calls); diff != "" {
		t.Errorf("Undeploy activities (-want +got):\n%s", diff)
	}
	if ids := commandIDs(f, kinds.DiskWipe); len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("disk.wipe command ids = %v, want two, the resend a new one", ids)
	}
	if tokens := f.inputs[kinds.ActIssueDiscovery]; len(tokens) != 2 {
		t.Errorf("discovery tokens issued = %d, want 2 (a fresh one for the second boot)", len(tokens))
	}
}

// TestDeployBootsAgainWhenTheRamdiskRestartsMidDeploy: a ramdisk command
// after the first of its boot (here a second deploy.image) failing
// BOOT_STALLED boots the ramdisk again and resends it; the deploy ends
// deployed.
func TestDeployBootsAgainWhenTheRamdiskRestartsMidDeploy(t *testing.T) {
	f := newFake("bcd", nodestate.Ready)
	f.profile.Steps = []kinds.ProfileStep{{Use: kinds.DeployImage, With: map[string]any{"image": "img_1"}},
		{Use: kinds.DeployImage, With: map[string]any{"image": "img_1"}}, {Use: kinds.BootKexec}}
	fails := 0
	f.hooks[kinds.DeployImage] = func(any) { // hit reads fail before the hook: the second call fails, once
		f.mu.Lock()
		defer f.mu.Unlock()
		if fails++; fails == 1 {
			f.fail[kinds.DeployImage] = restarted
		} else {
			delete(f.fail, kinds.DeployImage)
		}
	}
	res, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1})
	if err != nil || res.State != nodestate.Deployed {
		t.Fatalf("Deploy = %+v, %v; want deployed", res, err)
	}
	if n := len(f.inputs[kinds.ActIssueDiscovery]); n != 2 {
		t.Errorf("ramdisk boots = %d, want 2", n)
	}
	if ids := commandIDs(f, kinds.DeployImage); len(ids) != 3 || ids[1] == ids[2] {
		t.Errorf("deploy.image command ids = %v, want three, the resend a new one", ids)
	}
}

// TestDeployPowerCyclesWhenNoRamdiskKexecs: boot.kexec failing BOOT_STALLED
// (no ramdisk of the node talks to the site: it died before taking the
// command, or kexeced and its result was lost) power-cycles the machine,
// whose boot entry and boot device already point at its disk, so it boots
// the OS deploy.image wrote; the deploy ends deployed, boot.kexec sent once.
func TestDeployPowerCyclesWhenNoRamdiskKexecs(t *testing.T) {
	f := newFake("bcd", nodestate.Ready)
	f.fail[kinds.BootKexec] = errs.New(errs.BootStalled, "no ramdisk of node_1 has talked to this site agent's relay for 2m0s")
	res, err := run(t, f, wf.Deploy, wf.Input{ProfileID: "os", ProfileVersion: 1})
	if err != nil || res.State != nodestate.Deployed {
		t.Fatalf("Deploy = %+v, %v; want deployed", res, err)
	}
	i := slices.Index(f.calls, kinds.BootKexec)
	if i < 0 || i+1 >= len(f.calls) || f.calls[i+1] != kinds.PowerSetPower {
		t.Fatalf("Deploy activities = %v; want power.setPower right after boot.kexec", f.calls)
	}
	if n := len(f.inputs[kinds.BootKexec]); n != 1 {
		t.Errorf("boot.kexec sent %d times, want once", n)
	}
	powers := f.inputs[kinds.PowerSetPower]
	if last := powers[len(powers)-1].(kinds.SetPowerInput); last.Action != bmc.PowerCycle {
		t.Errorf("the power command after boot.kexec = %+v, want a power cycle", last)
	}
	devs := f.inputs[kinds.ManagementSetBootDevice]
	if last := devs[len(devs)-1].(kinds.SetBootDeviceInput); last.Device != bmc.BootDisk || !last.Persistent {
		t.Errorf("the last boot device set = %+v, want the disk, persistently", last)
	}
}

// TestALostCommandIsRetriedWithinHalfAMinute: in a deploy and an
// undeploy, every BMC call and ramdisk command, and cache.ensureImage, is
// scheduled with a heartbeat timeout of at most half a minute (the site
// heartbeats each every 5 s, waits included), and a boot table write,
// which does not heartbeat, with a start-to-close of at most half a
// minute; so a site agent killed under a command, or a completion lost on
// the way, costs that, not the command's start-to-close (2 minutes for a
// BMC call and, until then, a boot table write: the chaos run waited one
// out; 4 hours for cache.ensureImage before it had a heartbeat timeout: a
// chaos deploy waited 4 minutes on its attempt 1 after a bcd site kill -9).
// So does a control-plane activity (one database transaction, no
// heartbeat) under a killed `serve --only worker`: it had a minute.
func TestALostCommandIsRetriedWithinHalfAMinute(t *testing.T) {
	for _, tc := range []struct {
		verb   string
		from   nodestate.State
		in     wf.Input
		want   nodestate.State
		images int // cache.ensureImage commands it sends
	}{
		{wf.Deploy, nodestate.Ready, wf.Input{ProfileID: "os", ProfileVersion: 1}, nodestate.Deployed, 1},
		{wf.Undeploy, nodestate.Deployed, wf.Input{Wipe: "quick"}, nodestate.Ready, 0},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			f := newFake("bcd", tc.from)
			seen := map[string]int{}
			res, err := run(t, f, tc.verb, tc.in, func(env *testsuite.TestWorkflowEnvironment) {
				env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
					kind := info.ActivityType.Name
					seen[kind]++
					if info.TaskQueue == wf.ControlPlaneQueue {
						if info.StartToCloseTimeout > 30*time.Second {
							t.Errorf("control-plane activity %s scheduled with start-to-close %v, want at most 30s", kind, info.StartToCloseTimeout)
						}
						return
					}
					if kind == kinds.BootSetEntry || kind == kinds.BootClearEntry { // the site's own table: no wait, no heartbeat
						if info.HeartbeatTimeout != 0 || info.StartToCloseTimeout > 30*time.Second {
							t.Errorf("%s scheduled with heartbeat timeout %v and start-to-close %v, want none and at most 30s",
								kind, info.HeartbeatTimeout, info.StartToCloseTimeout)
						}
					} else if hb := info.HeartbeatTimeout; hb <= 0 || hb > 30*time.Second {
						t.Errorf("%s scheduled with heartbeat timeout %v, want one of at most 30s", kind, hb)
					}
				})
			})
			if err != nil || res.State != tc.want {
				t.Fatalf("%s = %+v, %v; want %s", tc.verb, res, err, tc.want)
			}
			if seen[kinds.PowerSetPower] == 0 || seen[kinds.BootSetEntry] == 0 || seen[kinds.ActTransition] == 0 {
				t.Errorf("activities seen = %v, want power.setPower, boot.setEntry and node.transition among them", seen)
			}
			if n := seen[kinds.CacheEnsureImage]; n != tc.images {
				t.Errorf("cache.ensureImage sent %d times, want %d", n, tc.images)
			}
		})
	}
}
