package store_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/store"
)

func TestProfiles(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	mk := func(id string, version int, doc string) store.Profile {
		return store.Profile{TenantID: "a", ID: id, Version: version, Document: json.RawMessage(doc), Visibility: "private"}
	}
	profiles := []store.Profile{
		mk("ubuntu", 1, `{"steps": [{"id": "image.write"}]}`),
		mk("ubuntu", 2, `{"steps": [{"id": "image.write"}, {"id": "wait.agentJoined"}]}`),
		mk("talos", 1, `{"target": "appliance"}`),
	}
	for _, p := range profiles {
		if err := s.CreateProfile(ctx, p); err != nil {
			t.Fatalf("CreateProfile(%s v%d) = %v", p.ID, p.Version, err)
		}
	}
	wantKind(t, "CreateProfile(ubuntu v1) again", s.CreateProfile(ctx, profiles[0]), errs.AlreadyExists)
	b := profiles[0]
	b.TenantID = "b"
	if err := s.CreateProfile(ctx, b); err != nil {
		t.Errorf("CreateProfile(b, ubuntu v1) = %v, want nil: ids are per tenant", err)
	}

	gets := []struct {
		id      string
		version int
		want    store.Profile
		kind    errs.Kind
	}{
		{"ubuntu", 0, profiles[1], ""},
		{"ubuntu", 1, profiles[0], ""},
		{"ubuntu", 2, profiles[1], ""},
		{"talos", 0, profiles[2], ""},
		{"ubuntu", 3, store.Profile{}, errs.NotFound},
		{"missing", 0, store.Profile{}, errs.NotFound},
	}
	for _, tt := range gets {
		got, err := s.GetProfile(ctx, "a", tt.id, tt.version)
		if errs.KindOf(err) != tt.kind {
			t.Errorf("GetProfile(a, %s, %d) = %v, want kind %q", tt.id, tt.version, err, tt.kind)
			continue
		}
		if diff := cmp.Diff(tt.want, got, ignoreCreated, equateJSON); diff != "" {
			t.Errorf("GetProfile(a, %s, %d) (-want +got):\n%s", tt.id, tt.version, diff)
		}
	}
	list, err := s.ListProfiles(ctx, "a")
	want := []store.Profile{profiles[2], profiles[0], profiles[1]} // by id, then version
	if diff := cmp.Diff(want, list, ignoreCreated, equateJSON); err != nil || diff != "" {
		t.Errorf("ListProfiles(a) = %v (-want +got):\n%s", err, diff)
	}
}

// equateJSON compares documents by meaning: jsonb normalizes spacing.
var equateJSON = cmp.Transformer("json", func(m json.RawMessage) any {
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		return string(m)
	}
	return v
})
