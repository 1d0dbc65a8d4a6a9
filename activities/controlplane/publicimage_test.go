package controlplane_test

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// TestGetImageOfPublicProfile: image.get reads the image from the catalog
// of the profile's owner (Owner, which the deploy sets from profile.get)
// and, without one (a run from before), from the node's tenant's.
func TestGetImageOfPublicProfile(t *testing.T) {
	f := newFixture(t, "bcd", store.PoolPolicy{})
	if err := f.s.CreateTenant(t.Context(), "owner"); err != nil {
		t.Fatal(err)
	}
	img, err := f.s.CreateImage(t.Context(), store.Image{TenantID: "owner", Name: "u", Source: "http://cache/u.raw",
		Digest: "sha256:" + strings.Repeat("ab", 32), Format: "raw", Compression: "none", Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.act.GetImage(t.Context(), kinds.ImageInput{TenantID: f.tenant, ImageID: img.ID, Owner: "owner"})
	if err != nil || got.ImageID != img.ID || got.Digest != img.Digest {
		t.Errorf("GetImage(owner's image, Owner owner) = %+v, %v, want the image", got, err)
	}
	if _, err := f.act.GetImage(t.Context(), kinds.ImageInput{TenantID: f.tenant, ImageID: img.ID}); errs.FromTemporal(err) != errs.NotFound {
		t.Errorf("GetImage(owner's image, no Owner) = %v, want NOT_FOUND", err)
	}
}
