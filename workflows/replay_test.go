package workflows_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/better-compute/better-compute/worker"
	wf "github.com/better-compute/better-compute/workflows"
)

// Ends of a recorded run.
const (
	completed = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	failed    = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
	canceled  = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
)

type replay struct {
	file, workflow string
	activities     int
	end            enumspb.EventType
	markers        []string // the GetVersion change ids the run recorded, in order
}

// GetVersion change ids of the workflows' markers.
const (
	bmcStatus      = "bmc-status-attribute"
	abortSafe      = "abort-leaves-machine-safe"
	noMAC          = "no-mac-nodes"
	renderUserData = "render-user-data"
	ramdiskRestart = "ramdisk-restart-boots-again"
	kexecGone      = "kexec-gone-power-cycles"
	merged         = "command-records-merged"
	behind         = "command-log-behind"
)

// bs is the marker a run recorded first from bmc-status-attribute on, and
// since it is asked at the first BMC report, a run with a report records.
var bs = []string{bmcStatus}

// replayed is every recorded history TestReplay replays: the run's file,
// workflow type, scheduled activities (local activities aside), last
// event and GetVersion markers. Each workflow type the control plane's worker registers has a
// completed run; the paths behind a workflow.GetVersion marker have a run
// of today's code and one recorded at the parent of the commit that
// introduced the marker (the "-pre-" files, which lack it), which only the
// marker's DefaultVersion branch replays.
var replayed = []replay{
	// Recorded at 3a11b55, before any GetVersion marker.
	{"enroll-3a11b55.json", wf.Enroll, 16, completed, nil},
	{"deploy-3a11b55.json", wf.Deploy, 15, completed, nil},
	{"undeploy-3a11b55.json", wf.Undeploy, 15, completed, nil},
	// Recorded at 004ee97 (record_test.go), one of each workflow type;
	// enroll, deploy and undeploy again by the commit that records a
	// command's outcome with the next command's start (command-records-merged,
	// asked as each run starts), the ones of 004ee97 kept as -pre-merged;
	// again by the commit that writes the command log behind the run
	// (command-log-behind, which implies the merge and alone is asked), the
	// merged ones kept as -pre-behind.
	{"enroll.json", wf.Enroll, 16, completed, []string{behind}},
	{"deploy.json", wf.Deploy, 15, completed, []string{behind}},
	{"undeploy.json", wf.Undeploy, 15, completed, []string{behind}},
	{"enroll-pre-behind.json", wf.Enroll, 16, completed, []string{merged}},
	{"deploy-pre-behind.json", wf.Deploy, 15, completed, []string{merged}},
	{"undeploy-pre-behind.json", wf.Undeploy, 15, completed, []string{merged}},
	{"enroll-pre-merged.json", wf.Enroll, 16, completed, bs},
	{"deploy-pre-merged.json", wf.Deploy, 15, completed, bs},
	{"undeploy-pre-merged.json", wf.Undeploy, 15, completed, bs},
	{"manage.json", wf.Manage, 3, completed, bs},
	{"inspect-manageable.json", wf.Inspect, 13, completed, bs},
	{"inspect-ready.json", wf.Inspect, 16, completed, bs},
	{"provide.json", wf.Provide, 13, completed, bs},
	{"rescue.json", wf.Rescue, 9, completed, bs},
	{"unrescue.json", wf.Unrescue, 6, completed, bs},
	{"power.json", wf.Power, 2, completed, bs},
	{"retire.json", wf.Retire, 14, completed, bs},
	{"recover.json", wf.Recover, 13, completed, bs},
	{"update.json", wf.UpdateBMC, 2, completed, nil},
	// The GetVersion paths at 004ee97: abort-leaves-machine-safe (power
	// off, boot entry cleared, next boot disk after the cancel),
	// no-mac-nodes (recover asks the BMC first, retire skips the ramdisk),
	// bmc-status-attribute (the signal and the upserts), and an enroll by
	// product UUID (ensureRamdisk's PXE discovery and metal confirm-mac).
	// deploy-aborted.json again with command-records-merged (the abort's
	// outcome recorded before the node moves to failed), 004ee97's kept as
	// -pre-merged; with command-log-behind, the merged one kept as
	// -pre-behind.
	{"deploy-aborted.json", wf.Deploy, 17, canceled, []string{behind, abortSafe}},
	{"deploy-aborted-pre-behind.json", wf.Deploy, 16, canceled, []string{merged, abortSafe}},
	{"deploy-aborted-pre-merged.json", wf.Deploy, 14, canceled, []string{bmcStatus, abortSafe}},
	{"enroll-wrong-password.json", wf.Enroll, 3, failed, bs},
	{"recover-nomac.json", wf.Recover, 15, completed, []string{bmcStatus, noMAC}},
	{"retire-nomac.json", wf.Retire, 6, completed, []string{bmcStatus, noMAC}},
	{"enroll-bmcstatus.json", wf.Enroll, 16, completed, bs},
	// Recorded by the commit that asks bmc-status-attribute at the run's
	// first BMC report, not at its start (the scenario of
	// enroll-bmcstatus.json): a run whose BMC answers records no marker,
	// and the histories above, which record it first, replay unchanged.
	{"enroll-bmcstatus-at-report.json", wf.Enroll, 16, completed, bs},
	{"enroll-nomac.json", wf.Enroll, 23, completed, bs},
	// Recorded at 00be436, after the deploy switch became the registry's
	// plan (profile.get's result carries it): a deploy, and one aborted.
	{"deploy-plan.json", wf.Deploy, 15, completed, bs},
	{"deploy-aborted-plan.json", wf.Deploy, 15, canceled, []string{bmcStatus, abortSafe}},
	// The same paths recorded at the parent of the commit that introduced
	// each marker: abort-leaves-machine-safe at a8ace5b (4dac56b^),
	// no-mac-nodes at a19d215 (fa39506^: recover and retire failed
	// UNSUPPORTED there), bmc-status-attribute at 9763eab (df7f353^, the
	// same failing-then-answering BMC, and the bmc-status signal an
	// upgraded control plane would relay to that run, sent by hand).
	{"deploy-aborted-pre-abortsafe.json", wf.Deploy, 11, canceled, nil},
	{"recover-nomac-pre-nomac.json", wf.Recover, 3, failed, nil},
	{"retire-nomac-pre-nomac.json", wf.Retire, 3, failed, nil},
	{"enroll-pre-bmcstatus.json", wf.Enroll, 16, completed, nil},
	// render-user-data: a deploy whose deploy.image names user data (a
	// template in a named secret, rendered with a join token by
	// userdata.render) recorded at 46487eb; the same profile's deploy at
	// 247a673 (c9ebd42^), which passed the reference to deploy.image as it
	// was (refused there: no digest; no user-data secrets yet).
	{"deploy-userdata.json", wf.Deploy, 16, completed, []string{bmcStatus, renderUserData}},
	{"deploy-userdata-pre-userdata.json", wf.Deploy, 11, failed, bs},
	// ramdisk-restart-boots-again: an enroll whose ramdisk is killed as it
	// starts the commissioning wipe and the machine PXE-boots again, so the
	// site fails the wipe BOOT_STALLED: at 46487eb the run boots the
	// ramdisk again and resends the wipe; at e354930 (7ec6cde^) the enroll
	// fails there (recorded with the machine hanging after its script fetch:
	// that commit's site misses a restart whose ramdisk joins at once).
	{"enroll-restart.json", wf.Enroll, 21, completed, []string{bmcStatus, ramdiskRestart}},
	{"enroll-restart-pre-restart.json", wf.Enroll, 13, failed, bs},
	// kexec-gone-power-cycles: a deploy whose ramdisk is killed as it starts
	// boot.kexec and not reset, so the site fails boot.kexec BOOT_STALLED
	// once the ramdisk is unheard for 90s: at 7dc9867 the run power-cycles
	// the machine, whose boot device is its disk, and ends deployed; at
	// 985248c (d6a2421^, a 2-minute bound there) the deploy fails there.
	{"deploy-kexecgone.json", wf.Deploy, 16, completed, []string{bmcStatus, kexecGone}},
	{"deploy-kexecgone-pre-kexecgone.json", wf.Deploy, 14, failed, bs},
	// command-log-behind's version 2 (refusalsRecorded): a deploy whose
	// image's source answers 404, refused before the node moves (the error
	// recorded on the node), and the next deploy of the node, its image
	// pinned before the node moves; both recorded with the change. Every
	// deploy above, recorded at version 1 or before, moved the node first.
	{"deploy-refused.json", wf.Deploy, 5, failed, []string{behind}},
	{"deploy-pinned-first.json", wf.Deploy, 15, completed, []string{behind}},
}

// TestReplay replays each recorded history (record_test.go: from the demo,
// payloads decrypted, tokens redacted) against today's workflow code,
// registered as the control plane's worker registers it. A change that
// reorders or adds commands fails here with a nondeterminism error
// (TMPRL1100): version it with workflow.GetVersion, and record the new
// path's history beside the old one's.
func TestReplay(t *testing.T) {
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tc := range replayed {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			h, err := client.HistoryFromJSON(open(t, filepath.Join("testdata", tc.file)), client.HistoryJSONOptions{})
			if err != nil {
				t.Fatalf("HistoryFromJSON(%s) = %v", tc.file, err)
			}
			evs := h.GetEvents()
			typ := evs[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
			scheduled := 0
			for _, ev := range evs {
				if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
					scheduled++
				}
			}
			last := evs[len(evs)-1].GetEventType()
			if typ != tc.workflow || scheduled != tc.activities || last != tc.end {
				t.Fatalf("%s = %s with %d activities ending %v, want %s with %d ending %v", tc.file, typ, scheduled, last,
					tc.workflow, tc.activities, tc.end)
			}
			if got := markers(t, h); !slices.Equal(got, tc.markers) {
				t.Errorf("%s records GetVersion markers %q, want %q", tc.file, got, tc.markers)
			}
			noSecrets(t, tc.file, h)
			r := sdkworker.NewWorkflowReplayer()
			worker.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistory(logger, h); err != nil {
				t.Errorf("ReplayWorkflowHistory(%s) = %v", tc.file, err)
			}
		})
	}
}

// TestReplayCoversEveryWorkflow: each workflow the control plane's worker
// registers has a completed recorded run in TestReplay's table, so a new
// workflow type comes with its history.
func TestReplayCoversEveryWorkflow(t *testing.T) {
	for name := range wf.Workflows() {
		if !slices.ContainsFunc(replayed, func(r replay) bool { return r.workflow == name && r.end == completed }) {
			t.Errorf("no completed %s history in TestReplay's table: record one (record_test.go)", name)
		}
	}
}

// markers are the change ids of h's GetVersion markers, in order.
func markers(t *testing.T, h *historypb.History) []string {
	t.Helper()
	var ids []string
	for _, ev := range h.GetEvents() {
		m := ev.GetMarkerRecordedEventAttributes()
		if ev.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED || m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("a Version marker's change-id: %v", err)
		}
		ids = append(ids, id)
	}
	return ids
}

// secret matches what a committed history must not hold in any payload: a
// join token in clear (the recorder redacts them to bc*_redacted), a
// private key, or user data (a cloud-config: a profile's secret template or
// its rendering).
var secret = regexp.MustCompile(`bc(disc|prov|site)_[a-z2-7]{16,}|PRIVATE KEY|#cloud-config`)

// noSecrets fails when a payload of h (decoded JSON, not the file's
// base64) holds a secret.
func noSecrets(t *testing.T, file string, h *historypb.History) {
	t.Helper()
	err := proxy.VisitPayloads(context.Background(), h, proxy.VisitPayloadsOptions{
		Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
			for _, p := range ps {
				if s := secret.Find(p.Data); s != nil {
					t.Errorf("%s holds %.12s… in a payload, want it redacted", file, s)
				}
			}
			return ps, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
