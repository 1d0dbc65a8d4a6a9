//go:build fakehw

package demo_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/controlplane"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// secretMachines is how many machines the secrets test takes through the loop.
const secretMachines = 2

// TestNoSecretAnywhere runs the demo's whole loop (enroll → ready → deploy →
// undeploy → ready) with every process logging at debug to its own file,
// then looks for every secret the run made — each ramdisk boot's discovery
// token, the site token, the root API token, the BMC password (a canary),
// the codec and secrets-sealing keys, every private key in the data dir, and
// any plain token at all — in every log, in every Temporal history event as
// stored (read without the codec, and the SQLite file itself), in every
// Postgres row but the keys' own, and in every API answer the test got.
func TestNoSecretAnywhere(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	logs := openLogs(t, filepath.Join(dir, "logs"), "demo", "control-plane", "temporal", "site", "rack", "bmc", "ramdisk")
	answers := &apiAnswers{}
	canary := "canary-bmc-" + rand.Text()
	d := startLogged(t, dataDir, logs, answers, canary)
	nodes, failed := d.LoopAll(ctxFor(t, 5*time.Minute))
	if len(failed) > 0 {
		t.Fatalf("LoopAll = %v, want every machine through the loop", failed)
	}
	readBack(t, d, nodes)
	secrets := runSecrets(t, d, dataDir, canary)
	events := scanHistories(t, d, dataDir, secrets)
	rows := scanRows(t, d.CP.Store(), secrets)
	d.Stop() // flushes every log and Temporal's database
	logs.close()
	// Temporal's SQLite file is read as bytes too: a token split across
	// its pages would escape this, the history read above would not.
	files := append(logs.paths(), filepath.Join(dataDir, "postgres", "postgres.log"), filepath.Join(dataDir, "temporal.db"))
	if wal := filepath.Join(dataDir, "temporal.db-wal"); exists(wal) {
		files = append(files, wal)
	}
	read := scanForSecrets(t, secrets, files...)
	for _, a := range answers.all() {
		scanBytes(t, secrets, "the answer of "+a.procedure, a.body)
	}
	logs.checkWritten(t)
	t.Logf("searched for %d forms of secrets in %d files (%d MiB), %d history events, %d rows, %d API answers",
		len(secrets), len(files), read>>20, events, rows, len(answers.all()))
}

// startLogged starts the demo with every process at debug, each into its
// own file, the API client's answers recorded and canary as the BMCs'
// password.
func startLogged(t *testing.T, dataDir string, logs *logFiles, answers *apiAnswers, canary string) *demo.Demo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := demo.Start(ctx, demo.Config{Machines: secretMachines, DataDir: dataDir, Out: logs.file("demo"),
		Logger: logs.logger("control-plane"), TemporalLogger: logs.logger("temporal"), TemporalLogLevel: slog.LevelDebug,
		SiteLogger: logs.logger("site"), RackLogger: logs.logger("rack"), BMCLogger: logs.logger("bmc"),
		RamdiskLogger: logs.logger("ramdisk"), BMCPassword: canary,
		APIOptions: []connect.ClientOption{connect.WithInterceptors(answers.interceptor())},
		Listen:     "127.0.0.1:0", TemporalListen: "127.0.0.1:0", UIListen: "off", AgentsListen: "127.0.0.1:0", ImageSize: 8 << 20})
	if err != nil {
		t.Fatalf("demo.Start = %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

// runSecrets collects what the run made: discovery tokens from the rack,
// the canary, the tokens and keys in the data dir, the keys in Postgres.
func runSecrets(t *testing.T, d *demo.Demo, dataDir, canary string) []secret {
	t.Helper()
	var out []secret
	for _, m := range d.Rack.Machines() {
		st, _ := d.Rack.State(m.Name)
		if len(st.Tokens) == 0 {
			t.Fatalf("Rack.State(%s).Tokens = none, want one per ramdisk boot", m.Name)
		}
		for i, tok := range st.Tokens {
			out = append(out, tokenSecret(fmt.Sprintf("the discovery token of %s's boot %d", m.Name, i+1), tok)...)
		}
	}
	out = append(out, passwordSecret("the BMC password", "admin", canary)...)
	files := secretsIn(t, dataDir)
	for _, want := range []string{"root-token", "site-token", "pki/ca.key", "pki/control-plane.key", "site-agent/agent.key"} {
		if !slicesHasPrefix(files, want) {
			t.Fatalf("secretsIn(%s) has nothing from %s, want every token and key the demo keeps", dataDir, want)
		}
	}
	return append(append(out, files...), storeSecrets(t, d.CP.Store())...)
}

func slicesHasPrefix(ss []secret, prefix string) bool {
	for _, s := range ss {
		if strings.HasPrefix(s.name, prefix) {
			return true
		}
	}
	return false
}

// readBack asks the API for everything it shows of the run, as an operator
// would afterwards (the answers are recorded like the demo's own).
func readBack(t *testing.T, d *demo.Demo, nodes map[string]string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for _, id := range nodes {
		node(t, d, id)
		commands(t, d, id)
		for _, w := range nodeWorkflows(t, d, id, 3) {
			if _, err := d.API.Workflows.Get(ctx, connect.NewRequest(&v1.GetWorkflowRequest{WorkflowId: w.WorkflowId, RunId: w.RunId})); err != nil {
				t.Fatalf("workflows.get %s = %v", w.WorkflowId, err)
			}
		}
	}
	for i, err := range []error{
		errOf(d.API.Metal.List(ctx, connect.NewRequest(&v1.ListNodesRequest{}))),
		errOf(d.API.Sites.List(ctx, connect.NewRequest(&v1.ListSitesRequest{}))),
		errOf(d.API.Pools.List(ctx, connect.NewRequest(&v1.ListPoolsRequest{}))),
		errOf(d.API.Images.List(ctx, connect.NewRequest(&v1.ListImagesRequest{}))),
		errOf(d.API.Profiles.List(ctx, connect.NewRequest(&v1.ListProfilesRequest{}))),
	} {
		if err != nil {
			t.Fatalf("list %d of metal, sites, pools, images, profiles = %v", i+1, err)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// nodeWorkflows waits for visibility to list at least n of the node's workflows.
func nodeWorkflows(t *testing.T, d *demo.Demo, id string, n int) []*v1.Workflow {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, err := d.API.Workflows.List(context.Background(), connect.NewRequest(&v1.ListWorkflowsRequest{NodeId: id}))
		if err != nil {
			t.Fatalf("workflows.list --node %s = %v", id, err)
		}
		if ws := r.Msg.Items; len(ws) >= n || time.Now().After(deadline) {
			if len(ws) < n {
				t.Fatalf("workflows.list --node %s = %d workflows, want %d", id, len(ws), n)
			}
			return ws
		}
	}
}

// scanHistories searches every workflow's visibility record and history as
// Temporal keeps them, read by a client without the codec, and checks that
// every payload in them is the codec's ciphertext. It returns the events read.
func scanHistories(t *testing.T, d *demo.Demo, dataDir string, secrets []secret) int {
	t.Helper()
	c := plainTemporal(t, d, dataDir)
	defer c.Close()
	ctx := ctxFor(t, time.Minute)
	execs := listWorkflows(t, ctx, c)
	if len(execs) < 3*secretMachines {
		t.Fatalf("ListWorkflow = %d workflows, want at least %d", len(execs), 3*secretMachines)
	}
	events, payloads := 0, 0
	for _, e := range execs {
		ev, p := scanHistory(t, ctx, c, e, secrets)
		events, payloads = events+ev, payloads+p
	}
	if payloads == 0 {
		t.Fatalf("%d history events hold no payload, want the workflows' inputs and results", events)
	}
	return events
}

// scanHistory searches one run's visibility record and history events, and
// checks their payloads. It returns the events and payloads it read.
func scanHistory(t *testing.T, ctx context.Context, c client.Client, e *workflowpb.WorkflowExecutionInfo,
	secrets []secret) (events, payloads int) {
	t.Helper()
	id, run := e.Execution.WorkflowId, e.Execution.RunId
	var plain []string
	// Search attributes are plain by design (Temporal indexes them: ids and
	// names, never a secret); every other payload is the codec's ciphertext.
	check := func(path string, p *commonpb.Payload) {
		if enc := string(p.Metadata[codec.MetadataEncoding]); enc != codec.EncodingEncrypted && !strings.Contains(path, ".search_attributes.") {
			plain = append(plain, path+" is "+enc)
		}
	}
	b, _ := proto.Marshal(e)
	scanBytes(t, secrets, fmt.Sprintf("the visibility record of %s run %s", id, run), b)
	payloads += walkPayloads(e.ProtoReflect(), "visibility", check)
	iter := c.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatalf("GetWorkflowHistory(%s, %s) = %v", id, run, err)
		}
		b, _ := proto.Marshal(ev)
		scanBytes(t, secrets, fmt.Sprintf("history event %d (%s) of %s run %s", ev.EventId, ev.EventType, id, run), b)
		payloads += walkPayloads(ev.ProtoReflect(), fmt.Sprintf("event %d", ev.EventId), check)
		events++
	}
	if len(plain) > 0 {
		t.Errorf("history of %s run %s: %d payloads are not %s, the first: %s", id, run, len(plain), codec.EncodingEncrypted, plain[0])
	}
	return events, payloads
}

// listWorkflows lists every workflow of the namespace, open or closed.
func listWorkflows(t *testing.T, ctx context.Context, c client.Client) []*workflowpb.WorkflowExecutionInfo {
	t.Helper()
	var out []*workflowpb.WorkflowExecutionInfo
	var next []byte
	for {
		r, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: controlplane.DefaultNamespace,
			PageSize: 100, NextPageToken: next})
		if err != nil {
			t.Fatalf("ListWorkflow = %v", err)
		}
		out = append(out, r.Executions...)
		if next = r.NextPageToken; len(next) == 0 {
			return out
		}
	}
}

// plainTemporal dials the embedded frontend as a control plane of the
// demo's CA (mTLS), with the SDK's default data converter: no codec.
func plainTemporal(t *testing.T, d *demo.Demo, dataDir string) client.Client {
	t.Helper()
	ca, err := pki.Load(filepath.Join(dataDir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	key, keyPEM, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.Issue(key.Public(), pki.RoleControlPlane, "secrets-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := pki.ClientTLS(ca.Pool(), certPEM, keyPEM, "127.0.0.1", ca.TrustDomain(), pki.Want{Roles: []pki.Role{pki.RoleControlPlane}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: d.CP.TemporalAddress(), Namespace: controlplane.DefaultNamespace,
		ConnectionOptions: client.ConnectionOptions{TLS: tc}, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatalf("dial Temporal without the codec = %v", err)
	}
	return c
}

// walkPayloads calls fn with every payload in m and its path, and returns
// how many it found.
func walkPayloads(m protoreflect.Message, path string, fn func(string, *commonpb.Payload)) int {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		fn(path, p)
		return 1
	}
	n := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := path + "." + string(fd.Name())
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				n += walkPayloads(mv.Message(), name+"["+k.String()+"]", fn)
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				n += walkPayloads(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", name, i), fn)
			}
		case !fd.IsMap() && !fd.IsList() && fd.Message() != nil:
			n += walkPayloads(v.Message(), name, fn)
		}
		return true
	})
	return n
}

// scanRows searches every row of every table, as JSON, but the settings
// table where the keys are kept. It returns the rows read.
func scanRows(t *testing.T, s *store.Store, secrets []secret) int {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	tables, err := queryStrings(ctx, s, `SELECT table_name::text FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'settings' ORDER BY 1`)
	if err != nil {
		t.Fatalf("list tables = %v", err)
	}
	n := 0
	for _, table := range tables {
		rows, err := queryStrings(ctx, s, fmt.Sprintf(`SELECT to_jsonb(t)::text FROM %s t`, pgx.Identifier{table}.Sanitize()))
		if err != nil {
			t.Fatalf("read %s = %v", table, err)
		}
		if table == "commands" && len(rows) == 0 {
			t.Fatalf("the commands table is empty, want every command of the loop")
		}
		for i, row := range rows {
			scanBytes(t, secrets, fmt.Sprintf("row %d of table %s", i+1, table), []byte(row))
		}
		n += len(rows)
	}
	return n
}

func queryStrings(ctx context.Context, s *store.Store, sql string) ([]string, error) {
	rows, err := s.Pool().Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
