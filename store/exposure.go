package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/rollout/rollout/rollout"
)

// Exposures are kept as one total per feature, version, bucket and hour
// (Unix seconds of the hour's start; 0 for totals from before hours were
// kept). Totals saturate at math.MaxInt64: SQLite would otherwise turn an
// overflowing sum into a float, which the table's CHECK refuses.

// AddExposures adds the counts to the stored ones in one transaction.
// Counts of features that no longer exist are dropped.
func (db *DB) AddExposures(ctx context.Context, counts []rollout.Exposure) error {
	return db.writeTx(ctx, "add exposures", func(tx *sql.Tx) error {
		return addExposures(ctx, tx, counts)
	})
}

// Exposures returns the stored counts of the feature key, by version,
// bucket and hour.
func (db *DB) Exposures(ctx context.Context, key string) ([]rollout.Exposure, error) {
	var out []rollout.Exposure
	err := db.readTx(ctx, fmt.Sprintf("exposures of %q", key), func(tx *sql.Tx) (err error) {
		out, err = listExposures(ctx, tx, key)
		return err
	})
	return out, err
}

// hourOf returns the Unix seconds of the start of t's hour; 0 for the zero
// time.
func hourOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Truncate(time.Hour).Unix()
}

// timeOfHour is hourOf's inverse.
func timeOfHour(h int64) time.Time {
	if h == 0 {
		return time.Time{}
	}
	return time.Unix(h, 0).UTC()
}

func addExposures(ctx context.Context, tx *sql.Tx, counts []rollout.Exposure) error {
	stmt, err := tx.PrepareContext(ctx, `
		INSERT INTO exposures (feature_id, version, bucket, hour, count)
		SELECT id, ?, ?, ?, ? FROM features WHERE id = ?
		ON CONFLICT (feature_id, version, bucket, hour) DO UPDATE SET count =
			CASE WHEN exposures.count > 9223372036854775807 - excluded.count THEN 9223372036854775807
			ELSE exposures.count + excluded.count END`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, e := range counts {
		if e.Version < 1 || e.Version > math.MaxInt32 || e.Count < 0 {
			return rollout.Errorf(rollout.EInvalid, "exposures of feature %q: version %d or count %d out of range", e.FeatureID, e.Version, e.Count)
		}
		if e.Count == 0 {
			continue
		}
		if _, err := stmt.ExecContext(ctx, e.Version, e.Bucket, hourOf(e.Hour), e.Count, e.FeatureID); err != nil {
			return err
		}
	}
	return nil
}

// listExposures reads the counts of feature key. A count that is not a
// whole number from 0 to math.MaxInt64 (a float that an overflowing sum
// left before totals saturated) reads as the nearest one.
func listExposures(ctx context.Context, tx *sql.Tx, key string) ([]rollout.Exposure, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT f.id, e.version, e.bucket, e.hour,
			CASE WHEN e.count >= 9223372036854775807 THEN 9223372036854775807
			WHEN e.count <= 0 THEN 0
			ELSE CAST(e.count AS INTEGER) END
		FROM exposures e JOIN features f ON f.id = e.feature_id
		WHERE f.key = ?
		ORDER BY e.version DESC, e.bucket, e.hour`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rollout.Exposure
	for rows.Next() {
		e := rollout.Exposure{Feature: key}
		var hour int64
		if err := rows.Scan(&e.FeatureID, &e.Version, &e.Bucket, &hour, &e.Count); err != nil {
			return nil, err
		}
		e.Hour = timeOfHour(hour)
		out = append(out, e)
	}
	return out, rows.Err()
}

// AddExposureBatch adds the counts as AddExposures does, in the same
// transaction as it records the batch ID, received at at; a batch whose ID
// is recorded adds nothing and returns false. IDs received
// rollout.ExposureBatchMemory before at are removed.
func (db *DB) AddExposureBatch(ctx context.Context, batch string, at time.Time, counts []rollout.Exposure) (bool, error) {
	var added bool
	err := db.writeTx(ctx, fmt.Sprintf("add exposure batch %q", batch), func(tx *sql.Tx) error {
		added = false
		if _, err := tx.ExecContext(ctx, `DELETE FROM exposure_batches WHERE received_at < ?`,
			at.Add(-rollout.ExposureBatchMemory).Unix()); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO exposure_batches (id, received_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
			batch, at.Unix())
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
