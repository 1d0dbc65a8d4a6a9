package autoinstall_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/sdk/iso"
	"github.com/better-compute/better-compute/steps"

	"example.com/acme-autoinstall"
)

// fakes of what the control plane's worker gives a step, with counters.
type fakeSQL struct{ committed, rolledBack int }

func (f *fakeSQL) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("the step queries nothing")
}

func (f *fakeSQL) Transaction(ctx context.Context, fn func(pgx.Tx) error) error {
	if err := fn(nil); err != nil {
		f.rolledBack++
		return err
	}
	f.committed++
	return nil
}

type fakePKI struct {
	reqs  []sdk.JoinTokenRequest
	nodes []sdk.Node
}

func (f *fakePKI) IssueJoinToken(_ context.Context, _ pgx.Tx, n sdk.Node, req sdk.JoinTokenRequest) (sdk.JoinToken, error) {
	f.reqs, f.nodes = append(f.reqs, req), append(f.nodes, n)
	return sdk.JoinToken{Token: sdk.Secret(fmt.Sprintf("bcjt_secret%d", len(f.reqs))), ExpiresAt: time.Now().Add(req.TTL)}, nil
}

type fakeArtifacts struct {
	data map[string][]byte
	fail error
}

func (f *fakeArtifacts) Publish(_ context.Context, _ pgx.Tx, n sdk.Node, name string, data []byte, ttl time.Duration) (string, error) {
	if f.fail != nil {
		return "", f.fail
	}
	url := fmt.Sprintf("http://site/artifacts/%s/%d/%s", n.ID, len(f.data), name)
	f.data[url] = data
	return url, nil
}

var node = sdk.Node{ID: "node_01abc", TenantID: "root", SiteID: "site_1", BMCDriver: "redfish"}

func TestProfileResolves(t *testing.T) {
	reg, err := steps.Registry(autoinstall.Plugin())
	if err != nil {
		t.Fatalf("steps.Registry(autoinstall.Plugin()) = %v", err)
	}
	vm := true
	plan, probs := reg.Resolve(autoinstall.Profile().Steps, &sdk.Target{VirtualMedia: &vm, BMCDriver: "redfish"})
	if len(probs) > 0 {
		t.Fatalf("Resolve(%s) = %v, want no problems", autoinstall.ProfileID, probs)
	}
	if got := plan.Steps[1]; got.FromStep != autoinstall.StepID || strings.Join(got.FromFields, ",") != "url" {
		t.Errorf("media.insert's plan = fromStep %q fields %v, want url from %s", got.FromStep, got.FromFields, autoinstall.StepID)
	}
	ipmi := false
	if _, probs := reg.Resolve(autoinstall.Profile().Steps, &sdk.Target{VirtualMedia: &ipmi, BMCDriver: "ipmi"}); len(probs) == 0 {
		t.Errorf("Resolve(%s) on a BMC without virtual media = no problems, want refused", autoinstall.ProfileID)
	}
}

// TestRenderIso: one transaction issues one single-use provisioned token
// for the node and publishes an ISO carrying it; the step's output is the
// URL alone.
func TestRenderIso(t *testing.T) {
	sql, pki, art := &fakeSQL{}, &fakePKI{}, &fakeArtifacts{data: map[string][]byte{}}
	c := &sdk.Context{Node: node, SQL: sql, PKI: pki, Artifacts: art}
	out, err := autoinstall.RenderIso().Run(context.Background(), c, sdk.Values{})
	if err != nil {
		t.Fatalf("renderIso = %v", err)
	}
	if len(pki.reqs) != 1 || pki.reqs[0].Role != sdk.RoleProvisioned || pki.reqs[0].MaxUses != 1 || pki.reqs[0].TTL != autoinstall.TokenTTL || pki.nodes[0].ID != node.ID {
		t.Errorf("renderIso issued %+v for %+v, want one single-use provisioned token for %s", pki.reqs, pki.nodes, node.ID)
	}
	if sql.committed != 1 {
		t.Errorf("renderIso committed %d transactions, want 1", sql.committed)
	}
	url, _ := out["url"].(string)
	if len(out) != 1 || art.data[url] == nil {
		t.Fatalf("renderIso = %v, want only the published url", out)
	}
	userData, err := iso.ReadFile(bytes.NewReader(art.data[url]), "user-data")
	if err != nil {
		t.Fatalf("iso.ReadFile(user-data) = %v", err)
	}
	for _, want := range []string{"echo bcjt_secret1 > /etc/bcd/join-token", "hostname: node-01abc", "#cloud-config"} {
		if !strings.Contains(string(userData), want) {
			t.Errorf("user-data = %s, want it to hold %q", userData, want)
		}
	}
	if meta, err := iso.ReadFile(bytes.NewReader(art.data[url]), "meta-data"); err != nil || !strings.Contains(string(meta), "instance-id: node_01abc") {
		t.Errorf("meta-data = %q, %v, want the instance id", meta, err)
	}
	if strings.Contains(fmt.Sprint(out), "bcjt_") {
		t.Errorf("renderIso's output %v holds the token", out)
	}
}

func TestRenderIsoFails(t *testing.T) {
	sql, pki := &fakeSQL{}, &fakePKI{}
	c := &sdk.Context{Node: node, SQL: sql, PKI: pki, Artifacts: &fakeArtifacts{fail: errors.New("disk full")}}
	_, err := autoinstall.RenderIso().Run(context.Background(), c, sdk.Values{})
	if err == nil || sql.rolledBack != 1 || strings.Contains(err.Error(), "bcjt_") {
		t.Errorf("renderIso with a failing Publish = %v (%d rolled back), want an error without the token, the transaction rolled back", err, sql.rolledBack)
	}
	_, err = autoinstall.RenderIso().Run(context.Background(), &sdk.Context{Node: node}, sdk.Values{})
	if !errs.Is(err, errs.Unsupported) {
		t.Errorf("renderIso off the control plane = %v, want UNSUPPORTED", err)
	}
}

// TestPublicPackagesOnly: the plugin builds as a module of its own, and
// neither it nor what it imports from better-compute is internal.
func TestPublicPackagesOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/better-compute/better-compute/sdk\n") {
		t.Errorf("go list -deps . = %s, want the sdk among them", out)
	}
	for _, p := range strings.Fields(string(out)) {
		if ours(p) && (strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal")) {
			t.Errorf("go list -deps . holds %s, want public packages only", p)
		}
	}
	imports, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, imports)
	}
	for _, p := range strings.Fields(string(imports)) {
		if ours(p) && strings.Contains(p, "/internal") {
			t.Errorf("a package of the plugin module imports %s, want public packages only", p)
		}
	}
}

func ours(pkg string) bool {
	return strings.HasPrefix(pkg, "github.com/better-compute/better-compute/")
}
