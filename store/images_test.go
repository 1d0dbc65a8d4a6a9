package store_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/store"
)

func TestImages(t *testing.T) {
	t.Parallel()
	s := newTenants(t)
	ctx := t.Context()
	in := store.Image{
		TenantID: "a", Name: "ubuntu-24.04", Source: "https://images.example/ubuntu.raw.zst",
		Digest: "sha256:0123abcd", Format: "raw", Compression: "zstd", Size: 5 << 30,
	}
	img1, err := s.CreateImage(ctx, in)
	if err != nil {
		t.Fatalf("CreateImage(a) = %v", err)
	}
	in.ID = img1.ID
	if diff := cmp.Diff(in, img1, ignoreCreated); diff != "" || !ids.Valid(ids.Image, img1.ID) || img1.CreatedAt.IsZero() {
		t.Errorf("CreateImage() = %s (-want +got):\n%s", img1.ID, diff)
	}
	img2, err := s.CreateImage(ctx, store.Image{TenantID: "a", Name: "talos", Source: "s", Digest: "d", Format: "iso", Compression: "none"})
	if err != nil {
		t.Fatalf("CreateImage(a, talos) = %v", err)
	}
	got, err := s.GetImage(ctx, "a", img1.ID)
	if diff := cmp.Diff(img1, got); err != nil || diff != "" {
		t.Errorf("GetImage(a, %s) = %v (-created +got):\n%s", img1.ID, err, diff)
	}
	list, err := s.ListImages(ctx, "a")
	if diff := cmp.Diff(byID(imageID, img1, img2), list); err != nil || diff != "" {
		t.Errorf("ListImages(a) = %v (-want +got):\n%s", err, diff)
	}
	_, err = s.CreateImage(ctx, store.Image{ID: img1.ID, TenantID: "a", Name: "dup"})
	wantKind(t, "CreateImage(taken id)", err, errs.AlreadyExists)
	_, err = s.CreateImage(ctx, store.Image{TenantID: "nobody", Name: "x"})
	wantKind(t, "CreateImage(unknown tenant)", err, errs.NotFound)
}
