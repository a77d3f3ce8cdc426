package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rollout/rollout/rollout"
)

// AddExposures adds the counts to the stored ones in one transaction.
// Counts of features that no longer exist are dropped.
func (db *DB) AddExposures(ctx context.Context, counts []rollout.Exposure) error {
	return db.writeTx(ctx, "add exposures", func(tx *sql.Tx) error {
		return addExposures(ctx, tx, counts)
	})
}

// Exposures returns the stored counts of the feature key, by version and
// bucket.
func (db *DB) Exposures(ctx context.Context, key string) ([]rollout.Exposure, error) {
	var out []rollout.Exposure
	err := db.readTx(ctx, fmt.Sprintf("exposures of %q", key), func(tx *sql.Tx) (err error) {
		out, err = listExposures(ctx, tx, key)
		return err
	})
	return out, err
}

func addExposures(ctx context.Context, tx *sql.Tx, counts []rollout.Exposure) error {
	stmt, err := tx.PrepareContext(ctx, `
		INSERT INTO exposures (feature_id, version, bucket, count)
		SELECT id, ?, ?, ? FROM features WHERE id = ?
		ON CONFLICT (feature_id, version, bucket) DO UPDATE SET count = exposures.count + excluded.count`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, e := range counts {
		if _, err := stmt.ExecContext(ctx, e.Version, e.Bucket, e.Count, e.FeatureID); err != nil {
			return err
		}
	}
	return nil
}

func listExposures(ctx context.Context, tx *sql.Tx, key string) ([]rollout.Exposure, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT f.id, e.version, e.bucket, e.count
		FROM exposures e JOIN features f ON f.id = e.feature_id
		WHERE f.key = ?
		ORDER BY e.version DESC, e.bucket`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rollout.Exposure
	for rows.Next() {
		e := rollout.Exposure{Feature: key}
		if err := rows.Scan(&e.FeatureID, &e.Version, &e.Bucket, &e.Count); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// AddExposureBatch adds the counts as AddExposures does, in the same
// transaction as it records the batch ID; a batch whose ID is recorded adds
// nothing and returns false. IDs older than rollout.ExposureBatchMemory are
// pruned.
func (db *DB) AddExposureBatch(ctx context.Context, batch string, counts []rollout.Exposure) (bool, error) {
	var added bool
	err := db.writeTx(ctx, fmt.Sprintf("add exposure batch %q", batch), func(tx *sql.Tx) error {
		now := db.now()
		if _, err := tx.ExecContext(ctx, `DELETE FROM exposure_batches WHERE received_at < ?`,
			now.Add(-rollout.ExposureBatchMemory).Unix()); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO exposure_batches (id, received_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
			batch, now.Unix())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // seen already: nothing to add
		}
		added = true
		return addExposures(ctx, tx, counts)
	})
	return added && err == nil, err
}
