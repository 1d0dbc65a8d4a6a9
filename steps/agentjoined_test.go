package steps_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// pool is the database as a control-plane step sees it.
type pool struct{ p *pgxpool.Pool }

func (p pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.p.Query(ctx, sql, args...)
}

func (p pool) Transaction(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, p.p, fn)
}

// wait.agentJoined is NotReady until a node certificate was issued by a join
// since the run started; the node's certificate from before the run and a
// renewal do not count.
func TestAgentJoinedWaitsForThisRunsJoin(t *testing.T) {
	ctx := t.Context()
	s := testpg.New(t)
	reg, err := steps.Registry()
	if err != nil {
		t.Fatal(err)
	}
	step, ok := reg.Step(steps.WaitAgentJoined)
	if !ok || step.RunsOn != sdk.ControlPlane || !step.RetrySafe || step.Timeout != 30*time.Minute {
		t.Fatalf("Registry().Step(wait.agentJoined) = %+v, %v, want a retry-safe control-plane step of 30m", step, ok)
	}
	in, probs := step.Input.Resolve("steps[0]", map[string]any{})
	if len(probs) > 0 || in.String("role") != "node" {
		t.Fatalf("Resolve(no with) = %v, %v, want role node", in, probs)
	}
	if _, probs := step.Input.Resolve("steps[0]", map[string]any{"role": "site"}); len(probs) != 1 || probs[0].Field != "steps[0].with.role" {
		t.Errorf("Resolve(role site) = %v, want a problem naming steps[0].with.role", probs)
	}
	node := ids.New(ids.Node)
	cert := func(token string, ago time.Duration) string {
		serial := ids.New(ids.Command)[4:]
		if err := s.RecordCertificate(ctx, store.Certificate{Serial: serial, TenantID: "root", Role: "node", Identity: node,
			SiteID: "site_1", TokenID: token, PublicKey: []byte("k"), CertPEM: []byte("c"), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, `UPDATE certificates SET issued_at = now() - $2::interval WHERE serial = $1`, serial, ago.String()); err != nil {
			t.Fatal(err)
		}
		return serial
	}
	cert("jtok_previous_os", time.Hour) // the node's previous OS joined an hour ago
	if err := s.StartCommand(ctx, store.Command{ID: ids.New(ids.Command), TenantID: "root", NodeID: node, SiteID: "site_1",
		Kind: "media.insert", RunsOn: "site", WorkflowID: "wf", RunID: "run", Step: "01.media.insert"}); err != nil {
		t.Fatal(err)
	}
	c := &sdk.Context{Node: sdk.Node{ID: node, TenantID: "root"}, WorkflowID: "wf", RunID: "run", SQL: pool{s.Pool()}}
	run := func() (sdk.Values, time.Duration, bool) {
		out, err := step.Run(ctx, c, in)
		d, notReady := sdk.IsNotReady(err)
		if err != nil && !notReady {
			t.Fatalf("Run = %v", err)
		}
		return out, d, notReady
	}
	if out, d, notReady := run(); !notReady || d != 5*time.Second {
		t.Fatalf("Run(only the previous OS's certificate) = %v, NotReady %v %s; want NotReady(5s)", out, notReady, d)
	}
	cert("renewal", 0)
	if out, _, notReady := run(); !notReady {
		t.Fatalf("Run(a renewal since the start) = %v, want NotReady", out)
	}
	joined := cert("jtok_this_run", 0)
	out, _, notReady := run()
	if notReady || out["serial"] != joined || out["joinedAt"] == "" {
		t.Fatalf("Run(joined) = %v, NotReady %v; want serial %s and joinedAt", out, notReady, joined)
	}
	if _, err := time.Parse(time.RFC3339Nano, out["joinedAt"].(string)); err != nil {
		t.Errorf("joinedAt %v is not RFC 3339: %v", out["joinedAt"], err)
	}
}
