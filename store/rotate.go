package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/errs"
)

// Rotation is what RotateKeys did.
type Rotation struct {
	SecretsKey   string   // the new secrets key's id
	Resealed     int      // secrets sealed anew under it
	Retired      []string // secrets keys deleted: nothing uses them any more
	CodecKeys    []string // the new codec keys' ids, one per tenant that had one
	OldCodecKeys int      // codec keys kept to decrypt history written under them
}

// resealBatch is how many secrets one statement re-seals.
const resealBatch = 100

// RotateKeys adds a new secrets key, re-seals every secret under it and
// deletes the old secrets keys once no secret names them; and adds a new
// codec key for every tenant (and the control plane) that has one. Nothing
// stops meanwhile: a secret opens under whichever key its row names, a
// write seals under the newest, and a write that raced the retirement seals
// again (writeSealed). Old codec keys stay: Temporal history keeps payloads
// encrypted under them, and they still decrypt it.
func (s *Store) RotateKeys(ctx context.Context) (Rotation, error) {
	var r Rotation
	k, err := s.addKey(ctx, s.pool, PurposeSecrets, "")
	if err != nil {
		return r, err
	}
	r.SecretsKey = k.ID
	// A writer that read the old key as current just before may still
	// insert under it: re-seal and retire again until nothing is left.
	for try := 0; try < 5; try++ {
		n, err := s.resealAll(ctx, k.ID)
		r.Resealed += n
		if err != nil {
			return r, err
		}
		retired, left, err := s.retireSecretsKeys(ctx, k.ID)
		r.Retired = append(r.Retired, retired...)
		if err != nil || left == 0 {
			if err == nil {
				err = s.rotateCodecKeys(ctx, &r)
			}
			return r, err
		}
	}
	return r, errs.New(errs.Unavailable, "secrets kept being written under the old key; run keys rotate again").WithOp("store.RotateKeys")
}

// resealAll re-seals every secret not under key id, in batches; a row that
// changed meanwhile is left to the next pass (compare-and-set on key_id).
func (s *Store) resealAll(ctx context.Context, id string) (int, error) {
	total := 0
	for {
		n, err := s.resealBatch(ctx, id)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

func (s *Store) resealBatch(ctx context.Context, id string) (int, error) {
	const op = "store.RotateKeys"
	rows, err := s.pool.Query(ctx, `SELECT id, tenant_id, name, coalesce(key_id, ''), sealed FROM secrets
		WHERE key_id IS DISTINCT FROM $1 ORDER BY id LIMIT $2`, id, resealBatch)
	if err != nil {
		return 0, dbError(op, err)
	}
	type row struct {
		id, tenant string
		name       *string
		v          sealed
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.tenant, &x.name, &x.v.keyID, &x.v.data)
		return x, err
	})
	if err != nil {
		return 0, dbError(op, err)
	}
	done := 0
	for _, x := range batch {
		ad := sealedFor(x.tenant, x.id, x.name)
		clear, err := s.openSealed(ctx, x.id, x.v, ad)
		if err != nil {
			return done, err
		}
		v, err := s.sealSecret(ctx, clear, ad)
		if err != nil {
			return done, err
		}
		if v.keyID != id {
			return done, errs.New(errs.Unavailable, "another rotation made a newer secrets key meanwhile; run keys rotate again").WithOp(op)
		}
		if _, err := s.pool.Exec(ctx, `UPDATE secrets SET sealed = $1, key_id = $2 WHERE id = $3 AND key_id IS NOT DISTINCT FROM $4`,
			v.data, v.keyID, x.id, nullable(x.v.keyID)); err != nil {
			return done, dbError(op, err)
		}
		done++
	}
	return done, nil
}

// retireSecretsKeys deletes every secrets key but id that no secret names,
// and says how many older ones are still named.
func (s *Store) retireSecretsKeys(ctx context.Context, id string) (retired []string, left int, err error) {
	const op = "store.RotateKeys"
	rows, err := s.pool.Query(ctx, `DELETE FROM data_keys d WHERE purpose = $1 AND id <> $2
		AND NOT EXISTS (SELECT 1 FROM secrets WHERE key_id = d.id) RETURNING id`, PurposeSecrets, id)
	if err != nil {
		return nil, 0, dbError(op, err)
	}
	if retired, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		if isKeyGone(err) { // a secret was sealed under one meanwhile
			return nil, 1, nil
		}
		return nil, 0, dbError(op, err)
	}
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM data_keys WHERE purpose = $1 AND id <> $2`, PurposeSecrets, id).Scan(&left)
	return retired, left, dbError(op, err)
}

// rotateCodecKeys adds a codec key version for every tenant that has one.
func (s *Store) rotateCodecKeys(ctx context.Context, r *Rotation) error {
	old, err := s.CodecKeys(ctx)
	if err != nil {
		return err
	}
	r.OldCodecKeys = len(old)
	seen := map[string]bool{}
	for _, k := range old {
		if seen[k.TenantID] {
			continue
		}
		seen[k.TenantID] = true
		nk, err := s.addKey(ctx, s.pool, PurposeCodec, k.TenantID)
		if err != nil {
			return err
		}
		r.CodecKeys = append(r.CodecKeys, nk.ID)
	}
	return nil
}
