//go:build fakehw

package demo_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/pki"
	wf "github.com/better-compute/better-compute/workflows"
)

// The spec's walkthrough profile, as deploy/examples/autoinstall declares it.
const autoinstallProfile = "ubuntu-24.04-autoinstall"

// TestAutoinstallPlugin is the spec's walkthrough "Ubuntu autoinstall over
// virtual media" against the demo: the plugin's own worker binary (built
// from its module) is the control plane's only worker, beside serve --only
// api; profiles validate resolves every step; enroll → ready, then
// AUTOINSTALL_LOOPS (default 2; task autoinstall-acceptance runs 20)
// unattended deploy → deployed (role host) → undeploy → ready loops, each
// install from a fresh single-use token read out of its ISO, the ISO
// ejected, exactly one attested wipe before each ready; no token in a
// command, a log or the workflow history.
func TestAutoinstallPlugin(t *testing.T) {
	loops := 2
	if s := os.Getenv("AUTOINSTALL_LOOPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("AUTOINSTALL_LOOPS=%q: want a number of loops", s)
		}
		loops = n
	}
	bin := buildPluginWorker(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	logs := openLogs(t, filepath.Join(dir, "logs"), "demo", "control-plane", "site", "rack", "bmc", "ramdisk", "acme-worker")
	d := startAPIOnly(t, dataDir, logs)
	startPluginWorker(t, bin, d, dataDir, logs.file("acme-worker"))
	ctx := ctxFor(t, time.Duration(2+2*loops)*time.Minute)
	awaitAutoinstallProfile(t, ctx, d, bin)

	m := d.Rack.Machines()[0]
	id, err := d.Enroll(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(ctx, m.Name, id, "ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	for i := range loops {
		autoinstallLoop(t, ctx, d, m.Name, id, i+1)
	}
	t.Logf("%d autoinstall loops in %s (%.1f s a loop)", loops, time.Since(started).Round(time.Millisecond),
		time.Since(started).Seconds()/float64(loops))

	st, _ := d.Rack.State(m.Name)
	tokens := freshTokens(t, st.InstallTokens, loops)
	for i, tok := range tokens {
		if err := joinAsNode(d, tok); code(err) != "UNAUTHENTICATED" {
			t.Errorf("a join with install %d's token after its install = %v, want UNAUTHENTICATED: the token is single-use", i+1, err)
		}
	}
	checkWipes(t, d, id, 1+loops)
	checkOneWipePerReady(t, d, id, 1+loops)
	var secrets []secret
	for i, tok := range tokens {
		secrets = append(secrets, tokenSecret(fmt.Sprintf("the join token of install %d", i+1), tok)...)
	}
	for _, c := range commands(t, d, id) {
		b, _ := protojson.Marshal(c)
		scanBytes(t, secrets, "command "+c.Id+" ("+c.Kind+")", b)
	}
	scanDecodedHistories(t, d, id, secrets)
	d.Stop()
	logs.close()
	scanForSecrets(t, secrets, logs.paths()...)
}

// buildPluginWorker builds deploy/examples/autoinstall's worker, as its
// author would, in its own module.
func buildPluginWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "acme-worker")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/acme-worker")
	cmd.Dir = filepath.Join("..", "deploy", "examples", "autoinstall")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/acme-worker in %s: %v\n%s", cmd.Dir, err, out)
	}
	return bin
}

// startAPIOnly starts the demo whose control plane runs no worker, every
// process logging at debug into its file.
func startAPIOnly(t *testing.T, dataDir string, logs *logFiles) *demo.Demo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := demo.Start(ctx, demo.Config{Machines: 1, DataDir: dataDir, Out: logs.file("demo"),
		Logger: logs.logger("control-plane"), SiteLogger: logs.logger("site"), RackLogger: logs.logger("rack"),
		BMCLogger: logs.logger("bmc"), RamdiskLogger: logs.logger("ramdisk"), ControlPlaneOnly: controlplane.OnlyAPI,
		Listen: "127.0.0.1:0", TemporalListen: "127.0.0.1:0", UIListen: "off", AgentsListen: "127.0.0.1:0", ImageSize: 8 << 20})
	if err != nil {
		t.Fatalf("demo.Start = %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

// startPluginWorker runs the plugin's worker on the demo's PostgreSQL and
// Temporal (mTLS with the demo's CA), as the README says an operator does.
func startPluginWorker(t *testing.T, bin string, d *demo.Demo, dataDir string, log *os.File) {
	t.Helper()
	cmd := exec.Command(bin, "--data-dir", filepath.Join(t.TempDir(), "acme-worker"),
		"--database-url", d.CP.DatabaseURL(), "--temporal-address", d.CP.TemporalAddress(), "--temporal-tls",
		"--pki-dir", filepath.Join(dataDir, "pki"), "--key-file", filepath.Join(dataDir, controlplane.KeyFile),
		"--config", filepath.Join(dataDir, "config.yaml"), "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// awaitAutoinstallProfile waits for the walkthrough's profile, which the
// plugin's worker stores at start (public, in the root tenant), checks it
// is the spec's six steps as the worker prints it, and that validate
// resolves every step.
func awaitAutoinstallProfile(t *testing.T, ctx context.Context, d *demo.Demo, bin string) {
	t.Helper()
	step := func(use, on string, with map[string]any) *v1.ProfileStep {
		if with == nil {
			return &v1.ProfileStep{Use: use, On: on}
		}
		s, err := structpb.NewStruct(with)
		if err != nil {
			t.Fatal(err)
		}
		return &v1.ProfileStep{Use: use, On: on, With: s}
	}
	p := &v1.Profile{Id: autoinstallProfile, Version: 1, Target: "metal", Role: "host", Steps: []*v1.ProfileStep{
		step("autoinstall.renderIso", "", nil),
		step("media.insert", "site", map[string]any{"fromStep": "autoinstall.renderIso"}),
		step("management.setBootDevice", "site", map[string]any{"device": "cd"}),
		step("power.setPower", "site", map[string]any{"action": "cycle"}),
		step("wait.agentJoined", "", map[string]any{"role": "node"}),
		step("media.eject", "site", nil),
	}}
	out, err := exec.Command(bin, "profile").Output()
	if err != nil {
		t.Fatalf("acme-worker profile: %v", err)
	}
	printed := &v1.Profile{}
	if err := protojson.Unmarshal(out, printed); err != nil || !proto.Equal(printed, p) {
		t.Fatalf("acme-worker profile = %s (%v), want the spec's walkthrough profile %v", out, err, p)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := d.API.Profiles.Get(ctx, connect.NewRequest(&v1.GetProfileRequest{Id: autoinstallProfile, Version: 1}))
		if err == nil {
			stored := proto.Clone(got.Msg.Profile).(*v1.Profile)
			stored.TenantId, stored.CreatedAt, stored.Visibility = "", nil, ""
			if got.Msg.Profile.Visibility != "public" || !proto.Equal(stored, p) {
				t.Fatalf("stored profile %s = %v, want the spec's walkthrough profile %v, public", autoinstallProfile, got.Msg.Profile, p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("profiles.get %s = %v, want it stored by the plugin's worker at start", autoinstallProfile, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	r, err := d.API.Profiles.Validate(ctx, connect.NewRequest(&v1.ValidateProfileRequest{Id: autoinstallProfile, ProfileVersion: 1}))
	if err != nil || !r.Msg.Valid || len(r.Msg.Problems) > 0 {
		t.Fatalf("profiles.validate %s = %v, %v, want valid: every step resolved", autoinstallProfile, r, err)
	}
}

// autoinstallLoop deploys the walkthrough's profile on a ready node and
// takes it back: deployed with role host, installed from a new ISO that
// the profile ejected, then ready.
func autoinstallLoop(t *testing.T, ctx context.Context, d *demo.Demo, name, id string, loop int) {
	t.Helper()
	if _, err := d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: autoinstallProfile, ProfileVersion: 1})); err != nil {
		t.Fatalf("loop %d: metal.deploy %s = %v", loop, autoinstallProfile, err)
	}
	if err := d.Wait(ctx, name, id, "deployed", 2*time.Minute); err != nil {
		t.Fatalf("loop %d: %v", loop, err)
	}
	if n := node(t, d, id); n.Role != "host" || n.ProfileId != autoinstallProfile {
		t.Errorf("loop %d: deployed node has role %q profile %q, want host %s", loop, n.Role, n.ProfileId, autoinstallProfile)
	}
	st, _ := d.Rack.State(name)
	if st.Installs != loop || st.NodeAgentRuns != loop || st.Media != "" || !st.OSImage {
		t.Errorf("loop %d: machine %+v, want install %d from the ISO, its node agent run, the OS on disk, the ISO ejected",
			loop, st, loop)
	}
	if _, err := d.API.Metal.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: id, Wipe: "quick"})); err != nil {
		t.Fatalf("loop %d: metal.undeploy = %v", loop, err)
	}
	if err := d.Wait(ctx, name, id, "ready", 2*time.Minute); err != nil {
		t.Fatalf("loop %d: %v", loop, err)
	}
}

// joinAsNode tries to join as an installed machine's bcd node with token
// through the agents' listener.
func joinAsNode(d *demo.Demo, token string) error {
	hc, err := agentsHTTP(d)
	if err != nil {
		return err
	}
	_, pemKey, _ := pki.NewEd25519Key()
	signer, _ := pki.ParseKey(pemKey)
	pub, _ := pki.MarshalPublicKey(signer.Public())
	c := bettercomputev1connect.NewJoinServiceClient(hc, d.CP.AgentsURL(), connect.WithProtoJSON())
	_, err = c.Join(context.Background(), connect.NewRequest(&v1.JoinRequest{Token: token, Role: string(pki.RoleNode), PublicKeyPem: pub}))
	return err
}

// freshTokens checks that each install had its own provisioned token.
func freshTokens(t *testing.T, tokens []string, loops int) []string {
	t.Helper()
	seen := map[string]bool{}
	for i, tok := range tokens {
		if seen[tok] || !plainToken.MatchString(tok) {
			t.Errorf("install %d's token (%.8s…) is reused or not a token: every install needs a fresh single-use one", i+1, tok)
		}
		seen[tok] = true
	}
	if len(tokens) != loops {
		t.Errorf("the ISOs held %d tokens, want %d (one per install)", len(tokens), loops)
	}
	return tokens
}

// checkOneWipePerReady: every workflow run that moved the node into ready
// ran exactly one wipe and one attestation check; deploys ran none.
func checkOneWipePerReady(t *testing.T, d *demo.Demo, id string, want int) {
	t.Helper()
	intoReady := 0
	for _, run := range runs(t, d, id) {
		typ := run[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		wipes, verifies := countActivities(run, "disk.wipe"), countActivities(run, wf.ActVerifyWipe)
		switch typ {
		case wf.Enroll, wf.Undeploy:
			intoReady++
			if wipes != 1 || verifies != 1 {
				t.Errorf("%s ran %d disk.wipe and %d wipe.verify, want exactly 1 each", typ, wipes, verifies)
			}
		case wf.Deploy:
			if wipes != 0 {
				t.Errorf("deploy ran %d wipes, want none", wipes)
			}
		}
	}
	if intoReady != want {
		t.Errorf("workflows into ready = %d, want %d", intoReady, want)
	}
}

// scanDecodedHistories searches every run of the node's workflow for the
// secrets: each event as stored (for any plain token too), and each
// payload decoded with every codec key, so a join token would be found
// even where the codec hides it. (Decoded payloads do hold the ramdisks'
// discovery tokens, which travel to the site in the workflow, encrypted.)
func scanDecodedHistories(t *testing.T, d *demo.Demo, id string, secrets []secret) {
	t.Helper()
	keys, err := d.CP.Store().CodecKeys(context.Background())
	if err != nil {
		t.Fatalf("CodecKeys = %v", err)
	}
	var codecs []*codec.Codec
	for _, k := range keys {
		c, err := codec.New(k.Key)
		if err != nil {
			t.Fatal(err)
		}
		codecs = append(codecs, c)
	}
	decoded := 0
	for _, run := range runs(t, d, id) {
		for _, ev := range run {
			where := fmt.Sprintf("history event %d (%s) of %s", ev.EventId, ev.EventType, id)
			b, _ := proto.Marshal(ev)
			scanBytes(t, secrets, where, b)
			walkPayloads(ev.ProtoReflect(), where, func(path string, p *commonpb.Payload) {
				for _, c := range codecs {
					if out, err := c.Decode([]*commonpb.Payload{p}); err == nil && len(out) == 1 {
						decoded++
						for _, s := range secrets {
							if bytes.Contains(out[0].Data, s.value) {
								t.Errorf("%s is in %s, decoded", s.name, path)
							}
						}
					}
				}
			})
		}
	}
	if decoded == 0 {
		t.Errorf("decoded no payload of %s's history, want its inputs and results searched in clear", id)
	}
}
