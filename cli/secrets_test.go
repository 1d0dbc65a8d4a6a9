package cli

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
)

// secretsFake answers as the API does: put replaces a name it has seen.
type secretsFake struct {
	bettercomputev1connect.UnimplementedTenantSecretsServiceHandler
	seen map[string]bool
}

func (f *secretsFake) Put(_ context.Context, r *connect.Request[v1.PutSecretRequest]) (*connect.Response[v1.PutSecretResponse], error) {
	replaced := f.seen[r.Msg.GetName()]
	f.seen[r.Msg.GetName()] = true
	return ok(&v1.PutSecretResponse{Replaced: replaced, Secret: &v1.Secret{Name: r.Msg.GetName(),
		Ref: "secret://" + r.Msg.GetTenantId() + "/" + r.Msg.GetName(), CreatedAt: timestamppb.Now(), UpdatedAt: timestamppb.Now()}})
}

func (f *secretsFake) List(context.Context, *connect.Request[v1.ListSecretsRequest]) (*connect.Response[v1.ListSecretsResponse], error) {
	return ok(&v1.ListSecretsResponse{Items: []*v1.Secret{{Name: "bmc-r12-14", Ref: "secret://root/bmc-r12-14", CreatedAt: timestamppb.Now()}}})
}

func newSecretsAPI(t *testing.T) (*recorder, string) {
	t.Helper()
	rec := &recorder{}
	mux := http.NewServeMux()
	mux.Handle(bettercomputev1connect.NewTenantSecretsServiceHandler(&secretsFake{seen: map[string]bool{}}))
	srv := httptest.NewServer(rec.wrap(mux))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// TestSecretsCommands: put sends the file's (or variable's) bytes and never
// prints them, says when it replaced a value; list shows names and refs;
// a value flag does not exist and two sources are refused before any call.
func TestSecretsCommands(t *testing.T) {
	isolate(t)
	const value = "root:hunter2-cli-secret\n"
	file := writeFile(t, t.TempDir(), "creds", value)
	t.Setenv("BMC_CREDS", value)
	rec, url := newSecretsAPI(t)
	for i, args := range [][]string{
		{"--tenant", "root", "secrets", "put", "bmc-r12-14", "--from-file", file},
		{"--tenant", "root", "secrets", "put", "bmc-r12-14", "--from-env", "BMC_CREDS"},
	} {
		stdout, stderr, code := run(url, args...)
		if code != 0 || strings.Contains(stdout+stderr, "hunter2") {
			t.Fatalf("Main(%q) = %d, stdout %q stderr %q; want 0 and no value printed", args, code, stdout, stderr)
		}
		if replaced := strings.Contains(stderr, "replaced the value of secret://root/bmc-r12-14"); replaced != (i == 1) {
			t.Errorf("Main(%q) stderr = %q, want the replace noted only the second time", args, stderr)
		}
	}
	calls := rec.all()
	want := base64.StdEncoding.EncodeToString([]byte(value))
	if len(calls) != 2 || calls[0].body["value"] != want || calls[1].body["value"] != want || calls[0].body["name"] != "bmc-r12-14" {
		t.Errorf("secrets put calls = %+v, want two carrying the value and the name", calls)
	}
	stdout, _, code := run(url, "secrets", "list")
	if code != 0 || !strings.Contains(stdout, "secret://root/bmc-r12-14") || !strings.Contains(stdout, "UPDATED_AT") {
		t.Errorf("secrets list = %d %q, want the name, ref and times", code, stdout)
	}
	for _, args := range [][]string{
		{"secrets", "put", "x", "--from-file", file, "--from-env", "BMC_CREDS"},
		{"secrets", "put", "x"},
		{"secrets", "put", "x", "--from-env", "NOT_SET_ANYWHERE"},
		{"secrets", "put", "x", "--value", "root:pw"},
	} {
		if _, stderr, code := run(url, args...); code == 0 || strings.Contains(stderr, "hunter2") {
			t.Errorf("Main(%q) = %d %q, want an error that shows no value", args, code, stderr)
		}
	}
	if n := len(rec.all()); n != 3 {
		t.Errorf("calls after the refused puts = %d, want 3 (none sent)", n)
	}
}
