package siteagent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// heartbeats collects the progress an activity heartbeats with.
type heartbeats struct {
	mu   sync.Mutex
	seen []kinds.Progress
}

func (h *heartbeats) listen(_ *activity.Info, d converter.EncodedValues) {
	var p kinds.Progress
	if d != nil && d.HasValues() && d.Get(&p) == nil {
		h.mu.Lock()
		h.seen = append(h.seen, p)
		h.mu.Unlock()
	}
}

func (h *heartbeats) saw(bytes int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.seen {
		if p.Bytes == bytes {
			return true
		}
	}
	return false
}

func activityEnv(a *Agent, hb *heartbeats) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	if err := a.Activities().Register(env, nil); err != nil {
		panic(err) // the built-ins always register
	}
	if hb != nil {
		env.SetOnActivityHeartbeatListener(hb.listen)
	}
	return env
}

type outcome struct {
	res kinds.Result
	err error
}

// runRelay runs the relay activity for cmd in the background.
func runRelay(env *testsuite.TestActivityEnvironment, cmd kinds.Command) <-chan outcome {
	done := make(chan outcome, 1)
	go func() {
		v, err := env.ExecuteActivity(cmd.Kind, cmd)
		var o outcome
		o.err = err
		if err == nil {
			o.err = v.Get(&o.res)
		}
		done <- o
	}()
	return done
}

func nextCommand(t *testing.T, c *http.Client, a *Agent, wait string) (int, kinds.Command) {
	t.Helper()
	status, body := call(t, c, http.MethodGet, a.RelayURL()+"/v1/commands/next?wait="+wait, nil)
	var cmd kinds.Command
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &cmd); err != nil {
			t.Fatalf("next command %s: %v", body, err)
		}
	}
	return status, cmd
}

func TestRelayRoundTrip(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	a := startAgent(t, testConfig(t, cp))
	hb := &heartbeats{}
	env := activityEnv(a, hb)
	mine, other := ramdiskClient(t, cp, pki.RoleRamdisk, nodeA), ramdiskClient(t, cp, pki.RoleRamdisk, nodeB)

	cmd := kinds.Command{ID: "cmd_wipe1", NodeID: nodeA, Kind: kinds.DiskWipe, Payload: json.RawMessage(`{"mode":"quick","nonce":"n1"}`)}
	done := runRelay(env, cmd)

	if status, _ := nextCommand(t, other, a, "200ms"); status != http.StatusNoContent {
		t.Errorf("another node's next = %d, want 204", status)
	}
	status, got := nextCommand(t, mine, a, "5s")
	if status != http.StatusOK || !cmp.Equal(got, cmd) {
		t.Fatalf("next = %d %+v, want 200 %+v", status, got, cmd)
	}
	url := a.RelayURL() + "/v1/commands/" + cmd.ID
	res := kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: true, Payload: json.RawMessage(`{"disks":2}`), Finished: time.Now().UTC().Truncate(time.Second)}
	for _, path := range []string{"/progress", "/result"} {
		if status, body := call(t, other, http.MethodPost, url+path, res); status != http.StatusForbidden {
			t.Errorf("POST %s by another node = %d %s, want 403", path, status, body)
		}
	}
	if status, body := call(t, mine, http.MethodPost, url+"/progress", kinds.Progress{Bytes: 4096, Total: 8192, Disk: "wwn-0x1"}); status != http.StatusNoContent {
		t.Fatalf("POST progress = %d %s, want 204", status, body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !hb.saw(4096) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !hb.saw(4096) {
		t.Errorf("the activity never heartbeated the ramdisk's progress of 4096 bytes")
	}
	if status, body := call(t, mine, http.MethodPost, url+"/result", res); status != http.StatusNoContent {
		t.Fatalf("POST result = %d %s, want 204", status, body)
	}
	o := <-done
	if o.err != nil || !cmp.Equal(o.res, res) {
		t.Errorf("relay activity = %+v, %v; want %+v", o.res, o.err, res)
	}
}

func TestRelayFailedResults(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	a := startAgent(t, testConfig(t, cp))
	env := activityEnv(a, nil)
	mine := ramdiskClient(t, cp, pki.RoleRamdisk, nodeA)
	tests := []struct {
		errorKind   string
		wantNoRetry bool
	}{
		{"DRIVER_ERROR", false},
		{"UNVERIFIED_WIPE", true},
		{"INVALID_INPUT", true},
	}
	for i, tt := range tests {
		cmd := kinds.Command{ID: "cmd_f" + string(rune('a'+i)), NodeID: nodeA, Kind: kinds.InventoryRefresh}
		done := runRelay(env, cmd)
		if status, _ := nextCommand(t, mine, a, "5s"); status != http.StatusOK {
			t.Fatalf("next = %d, want 200", status)
		}
		res := kinds.Result{OK: false, ErrorKind: tt.errorKind, Error: "disk on fire"}
		if status, body := call(t, mine, http.MethodPost, a.RelayURL()+"/v1/commands/"+cmd.ID+"/result", res); status != http.StatusNoContent {
			t.Fatalf("POST result = %d %s", status, body)
		}
		o := <-done
		var ae *temporal.ApplicationError
		if !errors.As(o.err, &ae) || ae.Type() != tt.errorKind || ae.NonRetryable() != tt.wantNoRetry {
			t.Errorf("relay activity with a %s result = %v, want type %s non-retryable %v", tt.errorKind, o.err, tt.errorKind, tt.wantNoRetry)
		}
	}
}

func TestRelayResultBeforeRetryIsNotResent(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	a := startAgent(t, testConfig(t, cp))
	mine := ramdiskClient(t, cp, pki.RoleRamdisk, nodeA)
	cmd := kinds.Command{ID: "cmd_kexec1", NodeID: nodeA, Kind: kinds.InventoryRefresh, Payload: json.RawMessage(`{}`)}

	// The first attempt hands the command out, then dies (heartbeat timeout).
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := a.Activities().Relay.Run(ctx, cmd, nil)
		first <- err
	}()
	if status, _ := nextCommand(t, mine, a, "5s"); status != http.StatusOK {
		t.Fatalf("next = %d, want 200", status)
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt = %v, want context.Canceled", err)
	}
	res := kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: true, Payload: json.RawMessage(`{"n":1}`)}
	if status, body := call(t, mine, http.MethodPost, a.RelayURL()+"/v1/commands/"+cmd.ID+"/result", res); status != http.StatusNoContent {
		t.Fatalf("POST result = %d %s", status, body)
	}

	o := <-runRelay(activityEnv(a, nil), cmd)
	if o.err != nil || !cmp.Equal(o.res, res) {
		t.Errorf("retried activity = %+v, %v; want the kept %+v", o.res, o.err, res)
	}
	if status, got := nextCommand(t, mine, a, "200ms"); status != http.StatusNoContent {
		t.Errorf("next after the retry = %d %+v, want 204: the command must not be sent again", status, got)
	}
}

func TestRelayRefusesWithoutRamdiskCertificate(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	a := startAgent(t, testConfig(t, cp))
	tests := []struct {
		name       string
		c          *http.Client
		wantStatus int
	}{
		{"no certificate", ramdiskClient(t, cp, "", ""), http.StatusUnauthorized},
		{"ramdisk without node identity", ramdiskClient(t, cp, pki.RoleRamdisk, "host-1"), http.StatusForbidden},
		{"an installed machine (it only renews)", ramdiskClient(t, cp, pki.RoleNode, "node_01k5w000000000000000000001"), http.StatusForbidden},
	}
	for _, tt := range tests {
		if status, body := call(t, tt.c, http.MethodGet, a.RelayURL()+"/v1/commands/next?wait=0s", nil); status != tt.wantStatus {
			t.Errorf("next with %s = %d %s, want %d", tt.name, status, body, tt.wantStatus)
		}
	}
	// Any role but a ramdisk's or a node's is refused at the handshake.
	for _, role := range []pki.Role{pki.RoleSite, pki.RoleControlPlane} {
		if resp, err := ramdiskClient(t, cp, role, "x-1").Get(a.RelayURL() + "/v1/commands/next?wait=0s"); err == nil {
			resp.Body.Close()
			t.Errorf("next with a %s certificate = %s, want the handshake refused", role, resp.Status)
		}
	}
}

// TestRelayReclaimsFromADeadBoot: a ramdisk boot that took a command and
// vanished (powered off mid-poll: its long poll stays open on this side)
// does not keep it; the node's next ramdisk boot gets it, and its result
// ends the activity. The boot that took it is not handed it again.
func TestRelayReclaimsFromADeadBoot(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	a := startAgent(t, testConfig(t, cp))
	env := activityEnv(a, nil)
	dead, next := ramdiskClient(t, cp, pki.RoleRamdisk, nodeA), ramdiskClient(t, cp, pki.RoleRamdisk, nodeA)

	cmd := kinds.Command{ID: "cmd_image1", NodeID: nodeA, Kind: kinds.DeployImage, Payload: json.RawMessage(`{"imageId":"img_1"}`)}
	done := runRelay(env, cmd)
	if status, got := nextCommand(t, dead, a, "5s"); status != http.StatusOK || got.ID != cmd.ID {
		t.Fatalf("first boot's next = %d %+v, want the command", status, got)
	}
	if status, _ := nextCommand(t, dead, a, "200ms"); status != http.StatusNoContent {
		t.Errorf("the boot that took it, polling again = %d, want 204 (never handed twice to one boot)", status)
	}
	status, got := nextCommand(t, next, a, "5s")
	if status != http.StatusOK || !cmp.Equal(got, cmd) {
		t.Fatalf("the next boot's next = %d %+v, want the command the dead boot took", status, got)
	}
	res := kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: true, Payload: json.RawMessage(`{}`), Finished: time.Now().UTC().Truncate(time.Second)}
	if status, body := call(t, next, http.MethodPost, a.RelayURL()+"/v1/commands/"+cmd.ID+"/result", res); status != http.StatusNoContent {
		t.Fatalf("POST result = %d %s, want 204", status, body)
	}
	if o := <-done; o.err != nil || !cmp.Equal(o.res, res) {
		t.Errorf("relay activity = %+v, %v; want %+v", o.res, o.err, res)
	}
}

// TestRelayFailsCommandOfARestartedRamdisk: a ramdisk that dies mid-command
// makes its machine PXE-boot again, fetch the same iPXE script and so the
// same discovery token, which the dead ramdisk spent: its join will be
// refused. The pending command fails at once with BOOT_STALLED saying so,
// not after the stall bound, so the workflow boots it again with a fresh
// token.
func TestRelayFailsCommandOfARestartedRamdisk(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.BootStall = time.Hour // only the restart may end the command
	a := startAgent(t, cfg)
	env := activityEnv(a, nil)
	const mac = "52:54:00:aa:00:21"
	if err := a.boot.SetEntry(kinds.BootEntry{NodeID: nodeA, MACs: []string{mac}, Ramdisk: true, DiscoveryToken: "bcdisc_spent"}); err != nil {
		t.Fatal(err)
	}
	fetchScript := func() {
		if status, _ := call(t, http.DefaultClient, http.MethodGet, a.BootURL()+"/ipxe?mac=52-54-00-AA-00-21", nil); status != 200 {
			t.Fatalf("GET /ipxe = %d, want 200", status)
		}
	}
	fetchScript()
	dead := ramdiskClient(t, cp, pki.RoleRamdisk, nodeA)
	cmd := kinds.Command{ID: "cmd_wipe1", NodeID: nodeA, Kind: kinds.DiskWipe, Payload: json.RawMessage(`{"mode":"quick"}`)}
	done := runRelay(env, cmd)
	if status, got := nextCommand(t, dead, a, "5s"); status != http.StatusOK || got.ID != cmd.ID {
		t.Fatalf("the ramdisk's next = %d %+v, want the command", status, got)
	}
	select {
	case o := <-done:
		t.Fatalf("relay activity ended while its ramdisk runs it: %+v, %v", o.res, o.err)
	case <-time.After(1500 * time.Millisecond):
	}
	start := time.Now()
	fetchScript() // the ramdisk died; the machine booted from the network again
	select {
	case o := <-done:
		if errs.FromTemporal(o.err) != errs.BootStalled || !strings.Contains(o.err.Error(), "restarted while running") ||
			!strings.Contains(o.err.Error(), "token is spent") || !strings.Contains(o.err.Error(), kinds.DiskWipe) {
			t.Errorf("relay activity = %v, want BOOT_STALLED naming %s, the restart and the spent token", o.err, kinds.DiskWipe)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the command failed %v after the restart, want within seconds", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("relay activity still waits 15s after its ramdisk restarted with a spent token")
	}
}

// TestRelayFailsCommandOfASpentTokenJoin: a ramdisk whose join the control
// plane refuses (its boot's single-use token already spent: an earlier join
// of that boot whose answer was lost) never joins; the command waiting for
// it fails at once with BOOT_STALLED saying so, not after the stall bound.
func TestRelayFailsCommandOfASpentTokenJoin(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.BootStall = time.Hour // only the refusal may end the command
	a := startAgent(t, cfg)
	env := activityEnv(a, nil)
	if err := a.boot.SetEntry(kinds.BootEntry{NodeID: nodeA, MACs: []string{"52:54:00:aa:00:22"}, Ramdisk: true,
		DiscoveryToken: "bcdisc_spent"}); err != nil {
		t.Fatal(err)
	}
	cmd := kinds.Command{ID: "cmd_image2", NodeID: nodeA, Kind: kinds.DeployImage, Payload: json.RawMessage(`{"imageId":"img_1"}`)}
	done := runRelay(env, cmd)
	key, _, _ := pki.NewEd25519Key()
	pub, _ := pki.MarshalPublicKey(key.Public())
	body, _ := protojson.Marshal(&v1.JoinRequest{Token: "bcdisc_spent", Role: "ramdisk", PublicKeyPem: pub})
	start := time.Now()
	if status, out := call(t, ramdiskClient(t, cp, "", ""), http.MethodPost, a.RelayURL()+"/v1/join", body); status != http.StatusUnauthorized {
		t.Fatalf("POST /v1/join with a spent token = %d %s, want 401", status, out)
	}
	select {
	case o := <-done:
		if errs.FromTemporal(o.err) != errs.BootStalled || !strings.Contains(o.err.Error(), "refused its join") ||
			!strings.Contains(o.err.Error(), "token is spent") || strings.Contains(o.err.Error(), "bcdisc_spent") {
			t.Errorf("relay activity = %v, want BOOT_STALLED naming the refused join and the spent token, not the token", o.err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the command failed %v after the refused join, want within seconds", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("relay activity still waits 15s after its ramdisk's join was refused")
	}
}

// TestRelayFailsCommandOfAGoneRamdisk: a command for a node whose ramdisk
// boot is not in progress (here boot.kexec after the boot entry was set to
// the disk) fails BOOT_STALLED once no ramdisk of the node has talked to
// the relay for RamdiskGone - the ramdisk died before taking it (its machine
// then booted its disk), or kexeced and the agent lost its result, and
// nothing would ever answer - while a ramdisk that keeps polling keeps its
// command alive however long it runs.
func TestRelayFailsCommandOfAGoneRamdisk(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.BootStall = time.Hour
	cfg.RamdiskGone = 2 * time.Second
	a := startAgent(t, cfg)
	env := activityEnv(a, nil)
	if err := a.boot.SetEntry(kinds.BootEntry{NodeID: nodeA, MACs: []string{"52:54:00:aa:00:31"}}); err != nil { // boots its disk
		t.Fatal(err)
	}

	// A live ramdisk: it takes the command and keeps polling; the command
	// waits for its result.
	live := ramdiskClient(t, cp, pki.RoleRamdisk, nodeA)
	cmd := kinds.Command{ID: "cmd_kexec_live", NodeID: nodeA, Kind: kinds.BootKexec, Payload: json.RawMessage(`{}`)}
	done := runRelay(env, cmd)
	if status, got := nextCommand(t, live, a, "5s"); status != http.StatusOK || got.ID != cmd.ID {
		t.Fatalf("the ramdisk's next = %d %+v, want the command", status, got)
	}
	for end := time.Now().Add(3 * cfg.RamdiskGone); time.Now().Before(end); {
		nextCommand(t, live, a, "500ms")
		select {
		case o := <-done:
			t.Fatalf("relay activity ended while its ramdisk polls: %+v, %v", o.res, o.err)
		default:
		}
	}
	res := kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: true, Payload: json.RawMessage(`{}`)}
	if status, body := call(t, live, http.MethodPost, a.RelayURL()+"/v1/commands/"+cmd.ID+"/result", res); status != http.StatusNoContent {
		t.Fatalf("POST result = %d %s", status, body)
	}
	if o := <-done; o.err != nil || !o.res.OK {
		t.Fatalf("relay activity = %+v, %v; want the live ramdisk's result", o.res, o.err)
	}

	// No ramdisk polls any more (it kexeced or died): the next command
	// fails about RamdiskGone after the ramdisk last talked.
	start := time.Now()
	gone := kinds.Command{ID: "cmd_kexec_gone", NodeID: nodeA, Kind: kinds.BootKexec, Payload: json.RawMessage(`{}`)}
	done = runRelay(env, gone)
	select {
	case o := <-done:
		if errs.FromTemporal(o.err) != errs.BootStalled || !strings.Contains(o.err.Error(), "no ramdisk of "+nodeA) {
			t.Errorf("relay activity = %v, want BOOT_STALLED saying no ramdisk of %s talks to the relay", o.err, nodeA)
		}
		if took := time.Since(start); took < cfg.RamdiskGone-time.Second || took > cfg.RamdiskGone+5*time.Second {
			t.Errorf("the command failed %v after the ramdisk last talked, want about %v", took, cfg.RamdiskGone)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("relay activity still waits 15s for a ramdisk nobody runs")
	}
}

// TestRelayGoneRamdiskCountsAcrossRestarts: the silence of a node's
// ramdisk counts from what the last attempt's heartbeats said
// (Progress.RamdiskHeard), not again from a restarted agent's start: a
// command retried on an agent that never heard the ramdisk fails
// BOOT_STALLED at once when the last attempt last heard it RamdiskGone ago.
func TestRelayGoneRamdiskCountsAcrossRestarts(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.BootStall = time.Hour
	cfg.RamdiskGone = 20 * time.Second
	a := startAgent(t, cfg)
	env := activityEnv(a, nil)
	if err := a.boot.SetEntry(kinds.BootEntry{NodeID: nodeA, MACs: []string{"52:54:00:aa:00:41"}}); err != nil {
		t.Fatal(err)
	}
	env.SetHeartbeatDetails(kinds.Progress{CommandID: "cmd_kexec_retried", RamdiskHeard: time.Now().Add(-time.Minute)})
	start := time.Now()
	done := runRelay(env, kinds.Command{ID: "cmd_kexec_retried", NodeID: nodeA, Kind: kinds.BootKexec, Payload: json.RawMessage(`{}`)})
	select {
	case o := <-done:
		if errs.FromTemporal(o.err) != errs.BootStalled || !strings.Contains(o.err.Error(), "no ramdisk of "+nodeA) {
			t.Errorf("relay activity = %v, want BOOT_STALLED saying no ramdisk of %s talks to the relay", o.err, nodeA)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the retried command failed %v after it started, want within seconds (its ramdisk was last heard a minute ago)", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the retried command still waits 15s; its ramdisk was last heard a minute ago")
	}
}
