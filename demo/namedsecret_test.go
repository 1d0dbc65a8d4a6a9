//go:build fakehw

package demo_test

import (
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/demo"
)

// TestNamedSecretEnroll: a machine enrolled with --bmc-credentials
// secret://root/NAME, a secret put by name, reaches ready: the site agent
// resolves the name. The secret cannot be deleted while the node uses it,
// and its value appears in no log, history event, row or API answer.
func TestNamedSecretEnroll(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	logs := openLogs(t, filepath.Join(dir, "logs"), "demo", "control-plane", "temporal", "site", "rack", "bmc", "ramdisk")
	answers := &apiAnswers{}
	canary := "canary-named-" + rand.Text()
	d := startLogged(t, dataDir, logs, answers, canary)
	m := d.Rack.Machines()[0]
	value := m.BMCUsername + ":" + canary + "\n"
	secrets := tenantSecrets(t, d.CP.APIURL(), d.CP.RootTokenPath(), answers)
	ctx := ctxFor(t, 5*time.Minute)
	put, err := secrets.Put(ctx, connect.NewRequest(&v1.PutSecretRequest{Name: "bmc-rack-1", Value: []byte(value)}))
	if err != nil || put.Msg.Secret.GetRef() != "secret://root/bmc-rack-1" {
		t.Fatalf("secrets.put(bmc-rack-1) = %v, %v; want secret://root/bmc-rack-1", put, err)
	}
	r, err := d.API.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: d.SiteID, PoolId: d.PoolID,
		Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver, CredentialsRef: put.Msg.Secret.GetRef()}}))
	if err != nil {
		t.Fatalf("metal.enroll --bmc-credentials %s = %v", put.Msg.Secret.GetRef(), err)
	}
	id := r.Msg.Node.Id
	if err := d.Wait(ctx, m.Name, id, "ready", 3*time.Minute); err != nil {
		t.Fatalf("Wait(%s, ready) = %v", id, err)
	}
	_, err = secrets.Delete(ctx, connect.NewRequest(&v1.DeleteSecretRequest{Name: "bmc-rack-1"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), id) {
		t.Errorf("secrets.delete(bmc-rack-1) while %s uses it = %v, want INVALID_STATE naming the node", id, err)
	}
	commands(t, d, id)
	scanNamedSecret(t, d, dataDir, logs, answers, append(passwordSecret("the named secret's password", m.BMCUsername, canary),
		keySecret("the named secret's value", []byte(value))...))
}

// tenantSecrets is a TenantSecretsService client with the root token, its
// answers recorded.
func tenantSecrets(t *testing.T, url, tokenFile string, answers *apiAnswers) bettercomputev1connect.TenantSecretsServiceClient {
	t.Helper()
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return bettercomputev1connect.NewTenantSecretsServiceClient(http.DefaultClient, url, connect.WithProtoJSON(),
		bearerAuth(strings.TrimSpace(string(b))), connect.WithInterceptors(answers.interceptor()))
}

// scanNamedSecret searches every history event, row, log and API answer of
// the run for secrets, as TestNoSecretAnywhere does.
func scanNamedSecret(t *testing.T, d *demo.Demo, dataDir string, logs *logFiles, answers *apiAnswers, secrets []secret) {
	t.Helper()
	c := plainTemporal(t, d, dataDir)
	events := 0
	for _, e := range listWorkflows(t, ctxFor(t, time.Minute), c) {
		ev, _ := scanHistory(t, ctxFor(t, time.Minute), c, e, secrets)
		events += ev
	}
	c.Close()
	rows := scanRows(t, d.CP.Store(), secrets)
	d.Stop()
	logs.close()
	files := append(logs.paths(), filepath.Join(dataDir, "postgres", "postgres.log"), filepath.Join(dataDir, "temporal.db"))
	read := scanForSecrets(t, secrets, files...)
	for _, a := range answers.all() {
		scanBytes(t, secrets, "the answer of "+a.procedure, a.body)
	}
	t.Logf("searched for %d forms of the named secret in %d files (%d MiB), %d history events, %d rows, %d API answers",
		len(secrets), len(files), read>>20, events, rows, len(answers.all()))
}
