package api

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/userdata"
	"github.com/better-compute/better-compute/store"
)

// maxSecretBytes bounds a secret's value: credentials, not files.
const maxSecretBytes = 64 << 10

// tenantSecrets serves TenantSecretsService. No answer and no error carries
// a value: errors about the value say what is wrong with its shape only.
type tenantSecrets struct{ *Server }

// Put seals a named secret, replacing the value of an existing one: nodes
// that use it get the new value the next time their site resolves it, which
// is how a BMC password is rotated.
func (s tenantSecrets) Put(ctx context.Context, req *connect.Request[v1.PutSecretRequest]) (*connect.Response[v1.PutSecretResponse], error) {
	m := req.Msg
	t, err := s.tenantOf(ctx, m.TenantId)
	if err != nil {
		return nil, err
	}
	var c checks
	c.name("name", m.Name)
	if c.err != nil {
		return nil, c.err
	}
	values, err := secretValues(m.Value)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(values)
	sec, replaced, err := s.store.PutSecret(ctx, t, m.Name, b)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.PutSecretResponse{Secret: secretOut(t, sec), Replaced: replaced}), nil
}

// List gives the tenant's named secrets: names and times, never values.
func (s tenantSecrets) List(ctx context.Context, req *connect.Request[v1.ListSecretsRequest]) (*connect.Response[v1.ListSecretsResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListSecrets(ctx, t)
	if err != nil {
		return nil, err
	}
	out := &v1.ListSecretsResponse{}
	for _, x := range list {
		out.Items = append(out.Items, secretOut(t, x))
	}
	return connect.NewResponse(out), nil
}

// Delete deletes a named secret no live node uses.
func (s tenantSecrets) Delete(ctx context.Context, req *connect.Request[v1.DeleteSecretRequest]) (*connect.Response[v1.DeleteSecretResponse], error) {
	t, err := s.tenantOf(ctx, req.Msg.TenantId)
	if err != nil {
		return nil, err
	}
	var c checks
	c.name("name", req.Msg.Name)
	if c.err != nil {
		return nil, c.err
	}
	if err := s.store.DeleteSecret(ctx, t, req.Msg.Name); err != nil {
		return nil, err
	}
	return connect.NewResponse(&v1.DeleteSecretResponse{}), nil
}

func secretOut(tenant string, x store.Secret) *v1.Secret {
	return &v1.Secret{Name: x.Name, Ref: store.SecretRef(tenant, x.Name),
		CreatedAt: timestamppb.New(x.CreatedAt), UpdatedAt: timestamppb.New(x.UpdatedAt)}
}

// secretValues reads a value: BMC credentials (a JSON object of strings
// with a username and password, or username:password, one trailing newline
// ignored, as a file written by echo has), or a JSON object holding a
// userData template (deploy.image's userDataRef). The value never appears
// in an error.
func secretValues(raw []byte) (map[string]string, error) {
	if len(raw) == 0 || len(raw) > maxSecretBytes {
		return nil, errs.Invalid("value", "a secret's value is 1 byte to %d KiB, got %d bytes", maxSecretBytes>>10, len(raw))
	}
	var values map[string]string
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		if json.Unmarshal(t, &values) != nil {
			return nil, errs.Invalid("value", "a value starting with '{' must be a JSON object of strings")
		}
	} else {
		line := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
		user, pass, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(line, "\r\n") {
			return nil, errs.Invalid("value", "want username:password on one line, or a JSON object such as {\"username\": …, \"password\": …}")
		}
		values = map[string]string{"username": user, "password": pass}
	}
	if values[userdata.Key] != "" { // a user-data template, which deploy.image's userDataRef names
		return values, nil
	}
	if values["username"] == "" || values["password"] == "" {
		return nil, errs.Invalid("value", "the secret needs a non-empty username and password (BMC credentials), or a userData template")
	}
	return values, nil
}
