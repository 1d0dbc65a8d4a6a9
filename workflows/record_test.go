//go:build record && fakehw

// Recording links the whole demo (Temporal server, Postgres, site agent,
// emulated rack), so it sits behind its own tag; replay_test.go does not.
//
//	go test -tags record,fakehw -run TestRecordHistories ./workflows/
package workflows_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/demo"
	wf "github.com/better-compute/better-compute/workflows"
)

// discoveryToken matches a plain discovery token; recorded histories keep
// none, even of a demo that is gone.
var discoveryToken = regexp.MustCompile(`bcdisc_[a-z2-7]+`)

// TestRecordHistories runs one machine of the demo through enroll, deploy
// and undeploy and writes each workflow's history to testdata, its payloads
// decrypted with the demo's codec key (so the replayer needs no key) and
// discovery tokens redacted.
func TestRecordHistories(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d, err := demo.Start(ctx, demo.Config{Machines: 1, DataDir: t.TempDir(), Listen: "127.0.0.1:0",
		TemporalListen: "127.0.0.1:0", UIListen: "off", AgentsListen: "127.0.0.1:0", ImageSize: 8 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("demo.Start = %v", err)
	}
	defer d.Stop()
	id, err := d.Loop(ctx, d.Rack.Machines()[0])
	if err != nil {
		t.Fatalf("Loop = %v", err)
	}
	ring, err := d.CP.Keyring(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := ring.Codec("")
	runs, err := d.API.Workflows.List(ctx, connect.NewRequest(&v1.ListWorkflowsRequest{NodeId: id}))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{wf.Enroll: "enroll", wf.Deploy: "deploy", wf.Undeploy: "undeploy"}
	for _, r := range runs.Msg.Items {
		h := history(ctx, t, d, r.WorkflowId, r.RunId)
		typ := h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()
		if names[typ] == "" {
			continue
		}
		err := proxy.VisitPayloads(ctx, h, proxy.VisitPayloadsOptions{SkipSearchAttributes: true,
			Visitor: func(_ *proxy.VisitPayloadsContext, ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
				out, err := c.Decode(ps)
				for _, p := range out {
					p.Data = discoveryToken.ReplaceAll(p.Data, []byte("bcdisc_redacted"))
				}
				return out, err
			}})
		if err != nil {
			t.Fatalf("decode %s: %v", typ, err)
		}
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", names[typ]+".json")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d events → %s", typ, len(h.Events), path)
		delete(names, typ)
	}
	if len(names) > 0 {
		t.Errorf("no history recorded for %v", names)
	}
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
