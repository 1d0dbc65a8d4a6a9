package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/ids"
)

const imageColumns = "id, tenant_id, name, source, digest, format, compression, size, created_at"

func scanImage(row pgx.Row) (Image, error) {
	var x Image
	err := row.Scan(&x.ID, &x.TenantID, &x.Name, &x.Source, &x.Digest, &x.Format, &x.Compression, &x.Size, &x.CreatedAt)
	return x, err
}

// CreateImage adds an image to the tenant's catalog (a new id unless img.ID is set).
func (s *Store) CreateImage(ctx context.Context, img Image) (Image, error) {
	const op = "store.CreateImage"
	if img.ID == "" {
		img.ID = ids.New(ids.Image)
	}
	out, err := scanImage(s.pool.QueryRow(ctx, `
		INSERT INTO images (id, tenant_id, name, source, digest, format, compression, size)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING `+imageColumns,
		img.ID, img.TenantID, img.Name, img.Source, img.Digest, img.Format, img.Compression, img.Size))
	if constraint, _, fk := violated(err); fk && constraint == "images_tenant_fk" {
		return Image{}, notFound("tenant", img.TenantID).WithOp(op)
	}
	return out, dbError(op, err)
}

// GetImage returns the tenant's image id.
func (s *Store) GetImage(ctx context.Context, tenantID, id string) (Image, error) {
	img, err := scanImage(s.pool.QueryRow(ctx,
		"SELECT "+imageColumns+" FROM images WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Image{}, notFound("image", id).WithOp("store.GetImage")
	}
	return img, dbError("store.GetImage", err)
}

// ListImages returns the tenant's images, oldest first.
func (s *Store) ListImages(ctx context.Context, tenantID string) ([]Image, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+imageColumns+" FROM images WHERE tenant_id = $1 ORDER BY id", tenantID)
	if err != nil {
		return nil, dbError("store.ListImages", err)
	}
	imgs, err := collect(rows, scanImage)
	return imgs, dbError("store.ListImages", err)
}
