package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// CertificateOwner returns the tenant and site an issued certificate was
// recorded for, so that a renewal records its successor under the same
// tenant (and RevokeIdentity revokes both). NOT_FOUND when the serial was
// never recorded.
func (s *Store) CertificateOwner(ctx context.Context, serial string) (tenantID, siteID string, err error) {
	err = s.pool.QueryRow(ctx, `SELECT tenant_id, site_id FROM certificates WHERE serial = $1`, serial).Scan(&tenantID, &siteID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", notFound("certificate", serial).WithOp("store.CertificateOwner")
	}
	return tenantID, siteID, dbError("store.CertificateOwner", err)
}
