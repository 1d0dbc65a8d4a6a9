package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
)

// Secret is a named secret as the store describes it: never its value.
type Secret struct {
	Name                 string
	CreatedAt, UpdatedAt time.Time
}

// SecretRef is how a node names the tenant's secret key (a name or an id).
func SecretRef(tenantID, key string) string { return "secret://" + tenantID + "/" + key }

// sealedFor is the additional data a secret is sealed with: its tenant and
// its name when it has one (a put that replaces a value keeps the row's id
// but seals anew), else its id. A sealed value copied to another row or
// tenant does not open.
func sealedFor(tenantID, id string, name *string) []byte {
	if name != nil {
		return []byte(tenantID + "/" + *name)
	}
	return []byte(tenantID + "/" + id)
}

// PutSecret seals value under the tenant's name, replacing the value a
// secret of that name had (replaced says so). name must be a plain word;
// the API checks it, the table refuses anything else.
func (s *Store) PutSecret(ctx context.Context, tenantID, name string, value []byte) (Secret, bool, error) {
	const op = "store.PutSecret"
	out := Secret{Name: name}
	var replaced bool
	err := s.writeSealed(ctx, value, sealedFor(tenantID, "", &name), func(v sealed) error {
		// A replaced row keeps created_at; its updated_at is this transaction's now().
		return s.pool.QueryRow(ctx, `INSERT INTO secrets (id, tenant_id, name, sealed, key_id) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant_id, name) WHERE name IS NOT NULL
			DO UPDATE SET sealed = EXCLUDED.sealed, key_id = EXCLUDED.key_id, updated_at = now()
			RETURNING created_at, updated_at, updated_at > created_at`,
			ids.New("sec"), tenantID, name, v.data, v.keyID).Scan(&out.CreatedAt, &out.UpdatedAt, &replaced)
	})
	return out, replaced, dbError(op, err)
}

// ListSecrets returns the tenant's named secrets by name, without values.
// Secrets sealed from a node's inline credentials have no name and belong
// to their node: they are not listed.
func (s *Store) ListSecrets(ctx context.Context, tenantID string) ([]Secret, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, created_at, updated_at FROM secrets
		WHERE tenant_id = $1 AND name IS NOT NULL ORDER BY name`, tenantID)
	if err != nil {
		return nil, dbError("store.ListSecrets", err)
	}
	out := []Secret{}
	for rows.Next() {
		var x Secret
		if err := rows.Scan(&x.Name, &x.CreatedAt, &x.UpdatedAt); err != nil {
			rows.Close()
			return nil, dbError("store.ListSecrets", err)
		}
		out = append(out, x)
	}
	return out, dbError("store.ListSecrets", rows.Err())
}

// SecretExists reports whether the tenant has a secret whose id or name is key.
func (s *Store) SecretExists(ctx context.Context, tenantID, key string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM secrets WHERE tenant_id = $1 AND (id = $2 OR name = $2))`,
		tenantID, key).Scan(&ok)
	return ok, dbError("store.SecretExists", err)
}

// DeleteSecret deletes the tenant's named secret unless a node that is not
// retired uses it: then it is INVALID_STATE naming those nodes. The check
// and the delete are one statement.
func (s *Store) DeleteSecret(ctx context.Context, tenantID, name string) error {
	const op = "store.DeleteSecret"
	var deleted int
	var users []string
	err := s.pool.QueryRow(ctx, `WITH users AS (
			SELECT id FROM metal_nodes WHERE tenant_id = $1 AND bmc_credentials_ref = $3 AND state <> 'retired'),
		del AS (
			DELETE FROM secrets WHERE tenant_id = $1 AND name = $2 AND NOT EXISTS (SELECT 1 FROM users) RETURNING id)
		SELECT (SELECT count(*) FROM del), ARRAY(SELECT id FROM users ORDER BY id)`,
		tenantID, name, SecretRef(tenantID, name)).Scan(&deleted, &users)
	switch {
	case err != nil:
		return dbError(op, err)
	case len(users) > 0:
		return errs.New(errs.InvalidState, "secret %s is the BMC credentials of %s: give them other credentials or retire them first",
			name, joinIDs(users)).WithOp(op)
	case deleted == 0:
		return notFound("secret", name).WithOp(op)
	}
	return nil
}

// joinIDs lists ids for a message, the first ten and how many more.
func joinIDs(xs []string) string {
	const most = 10
	if len(xs) <= most {
		return strings.Join(xs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(xs[:most], ", "), len(xs)-most)
}

// CreateNodeWithSecret seals value as node n's BMC credentials and creates n
// with secret://<tenant>/<id> in one transaction, so an enroll the store
// refuses (a BMC enrolled already) leaves no sealed row behind.
func (s *Store) CreateNodeWithSecret(ctx context.Context, n Node, value []byte) (Node, error) {
	const op = "store.CreateNodeWithSecret"
	id := ids.New("sec")
	n.BMCCredentialsRef = SecretRef(n.TenantID, id)
	var out Node
	err := s.writeSealed(ctx, value, sealedFor(n.TenantID, id, nil), func(v sealed) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO secrets (id, tenant_id, sealed, key_id) VALUES ($1, $2, $3, $4)`,
				id, n.TenantID, v.data, v.keyID); err != nil {
				return err
			}
			var err error
			out, err = createNode(ctx, tx, n)
			return err
		})
	})
	return out, dbError(op, err)
}

// CreateSecret seals value under the current secrets key and returns its
// id; the reference is secret://<tenant>/<id>.
func (s *Store) CreateSecret(ctx context.Context, tenantID string, value []byte) (string, error) {
	id := ids.New("sec")
	err := s.writeSealed(ctx, value, sealedFor(tenantID, id, nil), func(v sealed) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO secrets (id, tenant_id, sealed, key_id) VALUES ($1, $2, $3, $4)`, id, tenantID, v.data, v.keyID)
		return err
	})
	return id, dbError("store.CreateSecret", err)
}

// OpenSecret returns the tenant's secret in clear; key is its id or, for a
// named secret, its name.
func (s *Store) OpenSecret(ctx context.Context, tenantID, key string) ([]byte, error) {
	var id string
	var name, keyID *string
	var v sealed
	err := s.pool.QueryRow(ctx, `SELECT id, name, key_id, sealed FROM secrets WHERE tenant_id = $1 AND (id = $2 OR name = $2)`,
		tenantID, key).Scan(&id, &name, &keyID, &v.data)
	if isNoRows(err) {
		return nil, notFound("secret", key).WithOp("store.OpenSecret")
	}
	if err != nil {
		return nil, dbError("store.OpenSecret", err)
	}
	if keyID != nil {
		v.keyID = *keyID
	}
	return s.openSealed(ctx, key, v, sealedFor(tenantID, id, name))
}
