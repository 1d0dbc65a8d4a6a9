//go:build record && fakehw

// Recording links the whole demo (Temporal server, Postgres, site agent,
// emulated rack), so it sits behind its own tag; replay_test.go does not.
//
//	go test -tags record,fakehw -run TestRecordHistories ./workflows/
//
// RECORD=abort,nomac records only those scenarios (all by default). A
// change to workflow code behind workflow.GetVersion keeps a history of the
// old path: copy this file into a worktree at the parent of the change
// (adapting it to that commit's API), record there, and add the file as
// <name>-pre-<change>.json to TestReplay's table.
package workflows_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/ramdisk/disk"
	"github.com/better-compute/better-compute/sdk/iso"
	wf "github.com/better-compute/better-compute/workflows"
)

// token matches a plain join token (discovery, provisioned, site);
// recorded histories keep none, even of a demo that is gone.
var token = regexp.MustCompile(`bc(disc|prov|site)_[a-z2-7]+`)

// recordPassword is the emulated BMCs' password; wrongPassword is what the
// scenarios that need a failed enroll give instead.
const recordPassword, wrongPassword = "record-bmc-pw", "record-wrong-pw"

// TestRecordHistories runs the demo's machines through every workflow the
// control plane's worker registers and the paths behind its GetVersion
// markers, and writes each run's history to testdata/<file>, its payloads
// decrypted with the demo's codec key (so the replayer needs no key) and
// join tokens redacted. Each scenario has a machine of its own and they run
// at once.
func TestRecordHistories(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	d, err := demo.Start(ctx, demo.Config{Machines: 7, DataDir: dataDir, Listen: "127.0.0.1:0",
		TemporalListen: "127.0.0.1:0", UIListen: "off", AgentsListen: "127.0.0.1:0", ImageSize: 8 << 20,
		BMCPassword: recordPassword, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("demo.Start = %v", err)
	}
	defer d.Stop()
	rec := &recorder{d: d, dataDir: dataDir}
	ms := d.Rack.Machines()
	scenarios := []struct {
		name string
		run  func(ctx context.Context, t *testing.T, r *recorder)
	}{
		{"lifecycle", func(ctx context.Context, t *testing.T, r *recorder) { recordLifecycle(ctx, t, r, ms[0]) }},
		{"abort", func(ctx context.Context, t *testing.T, r *recorder) { recordAbort(ctx, t, r, ms[1]) }},
		{"bmcstatus", func(ctx context.Context, t *testing.T, r *recorder) { recordBMCStatus(ctx, t, r, ms[2]) }},
		{"update", func(ctx context.Context, t *testing.T, r *recorder) { recordUpdate(ctx, t, r, ms[3]) }},
		{"retire-nomac", func(ctx context.Context, t *testing.T, r *recorder) { recordRetireNoMAC(ctx, t, r, ms[4]) }},
		{"nomac", recordNoMACEnroll},
		{"userdata", func(ctx context.Context, t *testing.T, r *recorder) { recordUserData(ctx, t, r, ms[5]) }},
		{"restart", recordRamdiskRestart},
		{"kexecgone", recordKexecGone},
		{"refused", func(ctx context.Context, t *testing.T, r *recorder) { recordRefused(ctx, t, r, ms[6]) }},
	}
	only := strings.Split(os.Getenv("RECORD"), ",")
	t.Run("scenarios", func(t *testing.T) {
		for _, s := range scenarios {
			if only[0] != "" && !slices.Contains(only, s.name) {
				continue
			}
			t.Run(s.name, func(t *testing.T) { t.Parallel(); s.run(ctx, t, rec) })
		}
	})
	if t.Failed() {
		return
	}
	ring, err := d.CP.Keyring(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := ring.Codec("")
	for _, k := range rec.kept {
		h := history(ctx, t, d, k.workflowID, k.runID)
		err := proxy.VisitPayloads(ctx, h, proxy.VisitPayloadsOptions{SkipSearchAttributes: true,
			Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				out, err := c.Decode(ps)
				for _, p := range out {
					for _, a := range k.absent {
						if bytes.Contains(p.Data, a.value) {
							t.Errorf("%s: a payload holds %s", k.file, a.what)
						}
					}
					p.Data = token.ReplaceAll(p.Data, []byte("bc${1}_redacted"))
				}
				return out, err
			}})
		if err != nil {
			t.Fatalf("decode %s: %v", k.file, err)
		}
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", k.file)
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d events → %s", k.file, len(h.Events), path)
	}
}

// recorder collects the runs to write, file by file.
type recorder struct {
	d       *demo.Demo
	dataDir string // the demo's
	mu      sync.Mutex
	kept    []kept
}

// kept is a run to write; absent is what none of its decoded payloads may
// hold (checked before tokens are redacted).
type kept struct {
	file, workflowID, runID string
	absent                  []secretValue
}

type secretValue struct {
	what  string
	value []byte
}

// keep waits for the run to close (the node moves a moment before its
// workflow ends) and names the file its history goes to.
func (r *recorder) keep(ctx context.Context, t *testing.T, file, workflowID, runID string, absent ...secretValue) {
	t.Helper()
	err := r.d.CP.Client().GetWorkflow(ctx, workflowID, runID).Get(ctx, nil)
	t.Logf("%s: run %s closed: %v", file, runID, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept = append(r.kept, kept{file, workflowID, runID, absent})
}

// verb runs one verb on node and waits for the node to reach want.
func (r *recorder) verb(ctx context.Context, t *testing.T, file, node, want string,
	call func(context.Context) (*connect.Response[v1.VerbResponse], error)) {
	t.Helper()
	res, err := call(ctx)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	r.wait(ctx, t, node, want)
	if file != "" {
		r.keep(ctx, t, file, res.Msg.WorkflowId, res.Msg.RunId)
	} else if err := r.d.CP.Client().GetWorkflow(ctx, res.Msg.WorkflowId, res.Msg.RunId).Get(ctx, nil); err != nil {
		t.Fatalf("%s on %s = %v", want, node, err)
	}
}

// wait polls the node until it is in state want.
func (r *recorder) wait(ctx context.Context, t *testing.T, node, want string) *v1.Node {
	t.Helper()
	for {
		n, err := r.d.API.Metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: node}))
		if err != nil {
			t.Fatalf("metal.get(%s) = %v", node, err)
		}
		if n.Msg.Node.State == want {
			return n.Msg.Node
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s is %s (%s), want %s", node, n.Msg.Node.State, n.Msg.Node.LastError, want)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeReq(node string) *connect.Request[v1.NodeVerbRequest] {
	return connect.NewRequest(&v1.NodeVerbRequest{NodeId: node})
}

// enroll enrolls m with password and returns its node and run.
func (r *recorder) enroll(ctx context.Context, t *testing.T, m emulate.MachineInfo, password string) (*v1.VerbResponse, string) {
	t.Helper()
	res, err := r.d.API.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: r.d.SiteID, PoolId: r.d.PoolID,
		Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver,
			Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: password}}}))
	if err != nil {
		t.Fatalf("metal.enroll(%s) = %v", m.Name, err)
	}
	return res.Msg, res.Msg.Node.Id
}

// recordLifecycle: enroll, deploy, undeploy, manage, inspect (manageable
// and ready), provide, rescue, unrescue, power and retire of one machine.
func recordLifecycle(ctx context.Context, t *testing.T, r *recorder, m emulate.MachineInfo) {
	res, id := r.enroll(ctx, t, m, recordPassword)
	r.wait(ctx, t, id, "ready")
	r.keep(ctx, t, "enroll.json", res.WorkflowId, res.RunId)
	api := r.d.API.Metal
	deploy := func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
		return api.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: r.d.Profile, ProfileVersion: 1}))
	}
	undeploy := func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
		return api.Undeploy(ctx, connect.NewRequest(&v1.UndeployRequest{NodeId: id, Wipe: "quick"}))
	}
	plain := func(f func(context.Context, *connect.Request[v1.NodeVerbRequest]) (*connect.Response[v1.VerbResponse], error)) func(context.Context) (*connect.Response[v1.VerbResponse], error) {
		return func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) { return f(ctx, nodeReq(id)) }
	}
	steps := []struct {
		file, want string
		call       func(context.Context) (*connect.Response[v1.VerbResponse], error)
	}{
		{"deploy.json", "deployed", deploy},
		{"undeploy.json", "ready", undeploy},
		{"manage.json", "manageable", plain(api.Manage)},
		{"inspect-manageable.json", "manageable", plain(api.Inspect)},
		{"provide.json", "ready", plain(api.Provide)},
		{"inspect-ready.json", "ready", plain(api.Inspect)},
		{"", "deployed", deploy},
		{"rescue.json", "rescue", plain(api.Rescue)},
		{"unrescue.json", "deployed", plain(api.Unrescue)},
		{"power.json", "deployed", func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
			return api.Power(ctx, connect.NewRequest(&v1.PowerRequest{NodeId: id, Action: "off"}))
		}},
		{"", "ready", undeploy},
		{"retire.json", "retired", plain(api.Retire)},
	}
	for _, s := range steps {
		r.verb(ctx, t, s.file, id, s.want, s.call)
	}
}

// recordAbort: a deploy aborted while deploying (the machine left safe,
// the workflow cancelled), then recover.
func recordAbort(ctx context.Context, t *testing.T, r *recorder, m emulate.MachineInfo) {
	_, id := r.enroll(ctx, t, m, recordPassword)
	r.wait(ctx, t, id, "ready")
	dep, err := r.d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: r.d.Profile, ProfileVersion: 1}))
	if err != nil {
		t.Fatal(err)
	}
	r.wait(ctx, t, id, "deploying")
	if _, err := r.d.API.Metal.Abort(ctx, connect.NewRequest(&v1.AbortRequest{NodeId: id, Reason: "recorded abort"})); err != nil {
		t.Fatalf("metal.abort = %v", err)
	}
	r.wait(ctx, t, id, "failed")
	r.keep(ctx, t, "deploy-aborted.json", dep.Msg.WorkflowId, dep.Msg.RunId)
	r.verb(ctx, t, "recover.json", id, "ready", func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
		return r.d.API.Metal.Recover(ctx, nodeReq(id))
	})
}

// recordBMCStatus: an enroll whose BMC refuses connections until the
// workflow shows it in BmcStatus, then answers (through a proxy that is
// down, then up): the bmc-status signals and upserts are in its history.
func recordBMCStatus(ctx context.Context, t *testing.T, r *recorder, m emulate.MachineInfo) {
	u, err := url.Parse(m.BMCAddress)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := ln.Addr().String()
	ln.Close() // refused until the proxy is up
	backend := u.Host
	u.Host = front
	m.BMCAddress = u.String()
	res, id := r.enroll(ctx, t, m, recordPassword)
	for bmcStatusOf(ctx, t, r.d, res.WorkflowId) == "" {
		select {
		case <-ctx.Done():
			t.Fatal("BmcStatus never set")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if ln, err = net.Listen("tcp", front); err != nil {
		t.Fatalf("proxy on %s: %v", front, err)
	}
	defer ln.Close()
	go forward(ln, backend)
	r.wait(ctx, t, id, "ready")
	r.keep(ctx, t, "enroll-bmcstatus-at-report.json", res.WorkflowId, res.RunId)
}

// bmcStatusOf reads the run's BmcStatus search attribute ("" when unset).
func bmcStatusOf(ctx context.Context, t *testing.T, d *demo.Demo, workflowID string) string {
	desc, err := d.CP.Client().DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	p := desc.WorkflowExecutionInfo.GetSearchAttributes().GetIndexedFields()[wf.BMCStatusAttribute.GetName()]
	if p == nil {
		return ""
	}
	return string(p.Data)
}

// forward copies each connection to ln to and from backend.
func forward(ln net.Listener, backend string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b, err := net.Dial("tcp", backend)
			if err != nil {
				return
			}
			defer b.Close()
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			_, _ = io.Copy(c, b)
		}()
	}
}

// recordUpdate: an enroll with a wrong BMC password fails with no MAC;
// metal.update saves the right one and recover (no MAC: it asks the BMC
// first) takes the node to ready.
func recordUpdate(ctx context.Context, t *testing.T, r *recorder, m emulate.MachineInfo) {
	res, id := r.enroll(ctx, t, m, wrongPassword)
	r.wait(ctx, t, id, "failed")
	r.keep(ctx, t, "enroll-wrong-password.json", res.WorkflowId, res.RunId)
	if _, err := r.d.API.Metal.Update(ctx, connect.NewRequest(&v1.UpdateNodeRequest{Id: id,
		Bmc: &v1.Bmc{Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: recordPassword}}})); err != nil {
		t.Fatalf("metal.update = %v", err)
	}
	runs, err := r.d.API.Workflows.List(ctx, connect.NewRequest(&v1.ListWorkflowsRequest{NodeId: id}))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(runs.Msg.Items, func(w *v1.Workflow) bool { return w.Type == wf.UpdateBMC })
	if i < 0 {
		t.Fatalf("no %s run of %s in %v", wf.UpdateBMC, id, runs.Msg.Items)
	}
	r.keep(ctx, t, "update.json", runs.Msg.Items[i].WorkflowId, runs.Msg.Items[i].RunId)
	r.verb(ctx, t, "recover-nomac.json", id, "ready", func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
		return r.d.API.Metal.Recover(ctx, nodeReq(id))
	})
}

// recordRetireNoMAC: a node that never got a MAC (wrong password at
// enroll) is retired without a ramdisk or a wipe.
func recordRetireNoMAC(ctx context.Context, t *testing.T, r *recorder, m emulate.MachineInfo) {
	_, id := r.enroll(ctx, t, m, wrongPassword)
	r.wait(ctx, t, id, "failed")
	r.verb(ctx, t, "retire-nomac.json", id, "retired", func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
		return r.d.API.Metal.Retire(ctx, nodeReq(id))
	})
}

// recordNoMACEnroll: a machine whose BMC reports no MAC, enrolled by its
// product UUID: ensureRamdisk PXE-boots it, it waits for metal
// confirm-mac, then enrolls as usual.
func recordNoMACEnroll(ctx context.Context, t *testing.T, r *recorder) {
	rack, err := emulate.Start(ctx, emulate.Config{Machines: 1, Dir: t.TempDir(), BootURL: r.d.Agent.BootURL(),
		DisksPerMachine: []int64{1 << 30}, Password: recordPassword, BMCsHideMACs: true})
	if err != nil {
		t.Fatalf("emulate.Start = %v", err)
	}
	defer rack.Close()
	m := rack.Machines()[0]
	res, err := r.d.API.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: r.d.SiteID, PoolId: r.d.PoolID,
		ProductUuid: m.ProductUUID, Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver,
			Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: recordPassword}}}))
	if err != nil {
		t.Fatalf("metal.enroll(by product UUID) = %v", err)
	}
	id := res.Msg.Node.Id
	for n := r.wait(ctx, t, id, "inspecting"); n.MacCandidate == ""; n = r.wait(ctx, t, id, "inspecting") {
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := r.d.API.Metal.ConfirmMac(ctx, connect.NewRequest(&v1.ConfirmMacRequest{NodeId: id, Mac: m.MACs[0]})); err != nil {
		t.Fatalf("metal.confirmMac = %v", err)
	}
	r.wait(ctx, t, id, "ready")
	r.keep(ctx, t, "enroll-nomac.json", res.Msg.WorkflowId, res.Msg.RunId)
}

// userDataTemplate is the recorded deploy's user data (a secret: its
// rendering and join token reach only the node's disk).
const userDataTemplate = "#cloud-config\n# record-userdata-template\nhostname: {{hostname}}\n" +
	"runcmd: [[bcd, node, --token, '{{joinToken}}']]\n"

// recordUserData: a deploy whose deploy.image names user data (a template
// in a named secret, rendered with a join token by userdata.render behind
// render-user-data) onto a GPT image; the history holds neither the
// template, its rendering nor the token.
func recordUserData(ctx context.Context, t *testing.T, r *recorder, m emulate.MachineInfo) {
	_, id := r.enroll(ctx, t, m, recordPassword)
	r.wait(ctx, t, id, "ready")
	root, err := os.ReadFile(r.d.CP.RootTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+strings.TrimSpace(string(root)))
			return next(ctx, req)
		}
	}))
	secrets := bettercomputev1connect.NewTenantSecretsServiceClient(http.DefaultClient, r.d.CP.APIURL(), connect.WithProtoJSON(), auth)
	value, _ := json.Marshal(map[string]string{"userData": userDataTemplate})
	if _, err := secrets.Put(ctx, connect.NewRequest(&v1.PutSecretRequest{Name: "record-ud", Value: value})); err != nil {
		t.Fatalf("secrets.put(record-ud) = %v", err)
	}
	raw := disk.GPTImage(16384, 2048, 16384-34) // an 8 MiB GPT image: the seed goes after its partition
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.ServeContent(w, req, "os.raw", time.Unix(0, 0), bytes.NewReader(raw))
	}))
	defer srv.Close()
	sum := sha256.Sum256(raw)
	r.imageProfile(ctx, t, "record-ud-os", &v1.RegisterImageRequest{Name: "record-gpt-os",
		Source: srv.URL + "/os.raw", Digest: "sha256:" + hex.EncodeToString(sum[:]), Format: "raw", Compression: "none",
		Size: int64(len(raw))}, map[string]any{"userDataRef": "secret://root/record-ud"})
	res, err := r.d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: "record-ud-os", ProfileVersion: 1}))
	if err != nil {
		t.Fatalf("metal.deploy record-ud-os = %v", err)
	}
	r.wait(ctx, t, id, "deployed")
	rendered := seedUserData(t, filepath.Join(r.dataDir, "rack", m.Name))
	tok := regexp.MustCompile(`--token, '([^']+)'`).FindStringSubmatch(rendered)
	if tok == nil || !token.MatchString(tok[1]) {
		t.Fatalf("user-data on %s's disk = %q, want the template rendered with a join token", m.Name, rendered)
	}
	r.keep(ctx, t, "deploy-userdata.json", res.Msg.WorkflowId, res.Msg.RunId,
		secretValue{"the user data's join token", []byte(tok[1])},
		secretValue{"the user-data template", []byte("record-userdata-template")},
		secretValue{"the rendered user data", []byte(rendered)})
}

// recordRefused: a deploy whose image's source answers 404, refused
// before the node moves (the error recorded on the node, which stays
// ready), then the demo profile's deploy, its image pinned at the site
// before the node moves.
func recordRefused(ctx context.Context, t *testing.T, r *recorder, m emulate.MachineInfo) {
	_, id := r.enroll(ctx, t, m, recordPassword)
	r.wait(ctx, t, id, "ready")
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	r.imageProfile(ctx, t, "record-typo-os", &v1.RegisterImageRequest{Name: "record-typo-os",
		Source: srv.URL + "/typo.img", Digest: "sha256:" + strings.Repeat("ab", 32), Format: "raw", Compression: "none", Size: 8 << 20}, nil)
	res, err := r.d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: "record-typo-os", ProfileVersion: 1}))
	if err != nil {
		t.Fatalf("metal.deploy record-typo-os = %v", err)
	}
	r.keep(ctx, t, "deploy-refused.json", res.Msg.WorkflowId, res.Msg.RunId)
	if n := r.wait(ctx, t, id, "ready"); !strings.Contains(n.LastError, "left the node ready") {
		t.Fatalf("node %s after the refused deploy: %q, want the refusal", id, n.LastError)
	}
	r.verb(ctx, t, "deploy-pinned-first.json", id, "deployed", func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
		return r.d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: r.d.Profile, ProfileVersion: 1}))
	})
}

// imageProfile is the demo API's ImageProfile, failing t.
func (r *recorder) imageProfile(ctx context.Context, t *testing.T, id string, img *v1.RegisterImageRequest, with map[string]any) {
	t.Helper()
	if _, err := r.d.API.ImageProfile(ctx, id, img, with); err != nil {
		t.Fatal(err)
	}
}

// seedUserData reads user-data from the cidata partition of the machine's
// disk that has one.
func seedUserData(t *testing.T, machineDir string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(machineDir, "*.img"))
	for _, p := range paths {
		seed, err := disk.ReadSeed(disk.Disk{Name: filepath.Base(p), Path: p})
		if err != nil {
			continue
		}
		b, err := iso.ReadFile(bytes.NewReader(seed), "user-data")
		if err != nil {
			t.Fatalf("the seed on %s: %v", p, err)
		}
		return string(b)
	}
	t.Fatalf("no disk of %s (%v) has a cidata partition", machineDir, paths)
	return ""
}

// recordRamdiskRestart: an enroll whose ramdisk is killed as it starts the
// commissioning wipe and the machine reset (it PXE-boots again with its
// boot's spent token: the site fails the wipe BOOT_STALLED); today's code
// boots the ramdisk again and resends the wipe (ramdisk-restart-boots-again)
// and the node ends ready. The machine is in a rack of its own, whose
// ramdisk tracer is the hook that kills the ramdisk mid-command.
func recordRamdiskRestart(ctx context.Context, t *testing.T, r *recorder) {
	rack, m, arm, crashed := r.crashingRack(ctx, t, "disk.wipe", true)
	arm()
	res, id := r.enroll(ctx, t, m, recordPassword)
	waitCrash(ctx, t, crashed, "mid disk.wipe")
	r.wait(ctx, t, id, "ready")
	st, err := rack.State(m.Name)
	if err != nil {
		t.Fatal(err)
	}
	wipes := 0
	for _, k := range st.RamdiskRan {
		if k == "disk.wipe" {
			wipes++
		}
	}
	t.Logf("enroll-restart: %d ramdisk boots, ran %v", st.RamdiskBoots, st.RamdiskRan)
	if wipes < 2 || st.RamdiskBoots < 3 {
		t.Fatalf("%d ramdisk boots ran %d disk.wipe, want the killed one resent on a boot after the reset's", st.RamdiskBoots, wipes)
	}
	r.keep(ctx, t, "enroll-restart.json", res.WorkflowId, res.RunId)
}

// recordKexecGone: a deploy whose ramdisk is killed as it starts
// boot.kexec and not reset (the machine hangs: no ramdisk of the node talks
// to the site), so the site fails boot.kexec BOOT_STALLED once the
// ramdisk has been unheard for site.DefaultRamdiskGone (demo.Config does
// not shorten it); today's code power-cycles the machine
// (kexec-gone-power-cycles), whose boot device is its disk, and the node
// ends deployed (at d6a2421's parent, 985248c, recorded waiting for
// "failed", the deploy fails there).
func recordKexecGone(ctx context.Context, t *testing.T, r *recorder) {
	rack, m, arm, crashed := r.crashingRack(ctx, t, "boot.kexec", false)
	_, id := r.enroll(ctx, t, m, recordPassword)
	r.wait(ctx, t, id, "ready")
	arm()
	start := time.Now()
	r.verb(ctx, t, "deploy-kexecgone.json", id, "deployed", func(ctx context.Context) (*connect.Response[v1.VerbResponse], error) {
		return r.d.API.Metal.Deploy(ctx, connect.NewRequest(&v1.DeployRequest{NodeId: id, Profile: r.d.Profile, ProfileVersion: 1}))
	})
	waitCrash(ctx, t, crashed, "as boot.kexec starts")
	st, err := rack.State(m.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deploy-kexecgone: deployed after %s; machine booted into %s (kexeced %v, image %v), BMC calls %v",
		time.Since(start).Round(time.Second), st.BootedInto, st.Kexeced, st.OSImage, st.BMCCalls)
	if st.BootedInto != emulate.BootedOS || st.Kexeced || !st.OSImage {
		t.Fatalf("the machine booted into %s (kexeced %v, image %v), want its disk's OS through the power cycle",
			st.BootedInto, st.Kexeced, st.OSImage)
	}
}

// crashingRack starts a rack of one machine (closed with the test) whose
// ramdisk tracer is the hook that, once arm is called, kills the ramdisk as
// a command of kind starts and, with reset, resets the machine so it boots
// from the network again; crashed says how that went.
func (r *recorder) crashingRack(ctx context.Context, t *testing.T, kind string, reset bool) (
	rack *emulate.Rack, m emulate.MachineInfo, arm func(), crashed <-chan error) {
	t.Helper()
	crash := &crashAt{kind: kind}
	rack, err := emulate.Start(ctx, emulate.Config{Machines: 1, Dir: t.TempDir(), BootURL: r.d.Agent.BootURL(),
		DisksPerMachine: []int64{1 << 30}, Password: recordPassword, RamdiskTracer: crash,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("emulate.Start = %v", err)
	}
	t.Cleanup(func() { rack.Close() })
	m = rack.Machines()[0]
	done := make(chan error, 1)
	crash.crash = func() {
		ok, err := rack.CrashRamdisk(m.Name)
		if err == nil && !ok {
			err = errors.New("no ramdisk was running to crash")
		}
		if err == nil && reset {
			_, err = rack.ResetMachine(m.Name)
		}
		done <- err
	}
	return rack, m, func() { crash.armed.Store(true) }, done
}

// waitCrash waits for a crashingRack's crash, named where for the error.
func waitCrash(ctx context.Context, t *testing.T, crashed <-chan error, where string) {
	t.Helper()
	select {
	case err := <-crashed:
		if err != nil {
			t.Fatalf("crash the ramdisk %s: %v", where, err)
		}
	case <-ctx.Done():
		t.Fatalf("the ramdisk was never crashed %s", where)
	}
}

// crashAt is a ramdisk tracer that, armed, calls crash once when a
// command of kind starts and holds that command until its ramdisk stops,
// so the command neither runs nor reports.
type crashAt struct {
	noop.TracerProvider
	kind  string
	armed atomic.Bool
	crash func()
}

func (c *crashAt) Tracer(string, ...trace.TracerOption) trace.Tracer { return crashTracer{c: c} }

type crashTracer struct {
	noop.Tracer
	c *crashAt
}

func (t crashTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if name == "ramdisk "+t.c.kind && t.c.armed.CompareAndSwap(true, false) {
		go t.c.crash()
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
	}
	return t.Tracer.Start(ctx, name, opts...)
}

func history(ctx context.Context, t *testing.T, d *demo.Demo, id, run string) *historypb.History {
	t.Helper()
	it := d.CP.Client().GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	return h
}
