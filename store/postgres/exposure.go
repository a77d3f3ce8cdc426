package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// AddExposures adds the counts to the stored ones in one transaction, as
// increments, so that the counts of any number of instances add up.
// Counts of features that no longer exist are dropped.
func (db *DB) AddExposures(ctx context.Context, counts []rollout.Exposure) error {
	if len(counts) == 0 {
		return nil
	}
	ids, vers, buckets, ns := exposureColumns(counts)
	var err error
	for range 3 {
		err = db.writeTx(ctx, "add exposures", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, upsertExposures, ids, vers, buckets, ns)
			return err
		})
		if code, _ := sqlState(err); code != foreignKeyViolation {
			break
		}
	}
	return err
}

// upsertExposures adds counts given as four arrays (feature IDs, versions,
// buckets, counts). Rows are summed per key (one upsert may not touch a
// row twice) and written in key order, so that concurrent batches lock rows
// in the same order and cannot deadlock. A feature deleted between the
// EXISTS check and the insert fails the foreign key: callers try the batch
// again, and then it leaves that feature out.
const upsertExposures = `
	INSERT INTO exposures AS e (feature_id, version, bucket, count)
	SELECT u.feature_id, u.version, u.bucket, sum(u.count)::bigint
	FROM unnest($1::text[], $2::integer[], $3::text[], $4::bigint[]) AS u(feature_id, version, bucket, count)
	WHERE EXISTS (SELECT 1 FROM features f WHERE f.id = u.feature_id)
	GROUP BY u.feature_id, u.version, u.bucket
	ORDER BY u.feature_id, u.version, u.bucket
	ON CONFLICT (feature_id, version, bucket) DO UPDATE SET count = e.count + excluded.count`

// exposureColumns returns counts as the arrays of upsertExposures.
func exposureColumns(counts []rollout.Exposure) (ids []string, vers []int32, buckets []string, ns []int64) {
	ids, vers = make([]string, len(counts)), make([]int32, len(counts))
	buckets, ns = make([]string, len(counts)), make([]int64, len(counts))
	for i, e := range counts {
		ids[i], vers[i], buckets[i], ns[i] = e.FeatureID, int32(e.Version), e.Bucket, e.Count
	}
	return ids, vers, buckets, ns
}

// Exposures returns the stored counts of the feature key, newest version
// first.
func (db *DB) Exposures(ctx context.Context, key string) ([]rollout.Exposure, error) {
	var out []rollout.Exposure
	err := db.readTx(ctx, fmt.Sprintf("exposures of %q", key), func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT f.id, e.version, e.bucket, e.count
			FROM exposures e JOIN features f ON f.id = e.feature_id
			WHERE f.key = $1
			ORDER BY e.version DESC, e.bucket COLLATE "C"`, key)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rollout.Exposure, error) {
			e := rollout.Exposure{Feature: key}
			err := row.Scan(&e.FeatureID, &e.Version, &e.Bucket, &e.Count)
			return e, err
		})
		return err
	})
	return out, err
}

// AddExposureBatch adds the counts as AddExposures does, in the same
// transaction as it records the batch ID; a batch whose ID is recorded adds
// nothing and returns false. Two handles sending one batch at once: the
// second waits on the first's row and then finds it. IDs older than
// rollout.ExposureBatchMemory are pruned.
func (db *DB) AddExposureBatch(ctx context.Context, batch string, counts []rollout.Exposure) (bool, error) {
	ids, vers, buckets, ns := exposureColumns(counts)
	var added bool
	var err error
	for range 3 {
		added = false
		err = db.writeTx(ctx, fmt.Sprintf("add exposure batch %q", batch), func(tx pgx.Tx) error {
			now := db.now()
			if _, err := tx.Exec(ctx, `DELETE FROM exposure_batches WHERE received_at < $1`,
				now.Add(-rollout.ExposureBatchMemory)); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO exposure_batches (id, received_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
				batch, now)
			if err != nil || tag.RowsAffected() == 0 {
				return err // seen already: nothing to add
			}
			added = true
			if len(counts) == 0 {
				return nil
			}
			_, err = tx.Exec(ctx, upsertExposures, ids, vers, buckets, ns)
			return err
		})
		if code, _ := sqlState(err); code != foreignKeyViolation {
			break
		}
	}
	return added && err == nil, err
}
