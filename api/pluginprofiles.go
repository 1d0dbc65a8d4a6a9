package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/provision"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/store"
)

// StorePluginProfiles stores each profile the plugins of reg declare in the
// root tenant as a public profile, so every tenant can deploy it and only
// root changes its visibility or deletes it; the control-plane worker calls
// it at each start. A version already stored with the same document (its
// visibility aside: root may have changed it) is left alone; one stored
// with another document is kept (versions never change) and logged as an
// error naming the fix, as is a profile that does not resolve: neither
// stops the worker. Only a store failure does.
func StorePluginProfiles(ctx context.Context, st *store.Store, reg *sdk.Registry, log *slog.Logger) error {
	for _, p := range reg.Profiles() {
		if _, probs := reg.Resolve(p.Steps, nil); len(probs) > 0 {
			log.Error("plugin profile not stored: it does not resolve", "profile", p.ID, "version", p.Version,
				"field", probs[0].Field, "problem", probs[0].Message)
			continue
		}
		conflict, err := storePluginProfile(ctx, st, p)
		if err != nil {
			return err
		}
		if conflict != "" {
			log.Error("plugin profile not stored: "+conflict, "profile", p.ID, "version", p.Version)
		}
	}
	return nil
}

// storePluginProfile creates p in the root tenant, public; conflict says
// why a stored profile keeps the id and version instead.
func storePluginProfile(ctx context.Context, st *store.Store, p provision.Profile) (conflict string, err error) {
	p.Visibility = store.Public
	doc, err := json.Marshal(p)
	if err != nil {
		return "", errs.Wrap(errs.InvalidInput, err, "plugin profile %s", p.ID)
	}
	err = st.CreateProfile(ctx, store.Profile{TenantID: RootTenant, ID: p.ID, Version: p.Version, Document: doc, Visibility: store.Public})
	if !errs.Is(err, errs.AlreadyExists) {
		return "", err
	}
	have, gerr := st.GetProfile(ctx, RootTenant, p.ID, p.Version)
	switch {
	case errs.Is(gerr, errs.NotFound) || gerr == nil && have.TenantID != RootTenant:
		return err.Error(), nil // another tenant's public profile has the id
	case gerr != nil:
		return "", gerr
	}
	same, err := sameDocument(have.Document, doc)
	if err != nil || same {
		return "", err
	}
	return fmt.Sprintf("root's profile %s version %d has another document than the plugin's and versions never change: bump the version of the plugin's profile",
		p.ID, p.Version), nil
}

// sameDocument compares two profile documents, their visibility aside, as
// decoded: the database may store the JSON in another order or spacing.
func sameDocument(a, b []byte) (bool, error) {
	norm := func(d []byte) ([]byte, error) {
		var p provision.Profile
		if err := json.Unmarshal(d, &p); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "decode a stored profile")
		}
		p.Visibility = ""
		return json.Marshal(p)
	}
	na, err := norm(a)
	if err != nil {
		return false, err
	}
	nb, err := norm(b)
	return bytes.Equal(na, nb), err
}
