package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// Exposures are kept as one total per feature, version, bucket and hour
// (Unix seconds of the hour's start, as in SQLite; 0 for totals from
// before hours were kept). Totals saturate at the largest bigint, so that
// a flush never fails on a total that would overflow.

// AddExposures adds the counts to the stored ones in one transaction, as
// increments, so that the counts of any number of instances add up.
// Counts of features that no longer exist are dropped.
func (db *DB) AddExposures(ctx context.Context, counts []rollout.Exposure) error {
	cols, err := exposureColumnsOf(counts)
	if err != nil || cols.len() == 0 {
		return err
	}
	for range 3 {
		err = db.writeTx(ctx, "add exposures", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, upsertExposures, cols.ids, cols.vers, cols.buckets, cols.hours, cols.ns)
			return err
		})
		if code, _ := sqlState(err); code != foreignKeyViolation {
			break
		}
	}
	return err
}

// upsertExposures adds counts given as five arrays (feature IDs, versions,
// buckets, hours, counts). Rows are summed per key (one upsert may not
// touch a row twice) and written in key order, so that concurrent batches
// lock rows in the same order and cannot deadlock. A feature deleted
// between the EXISTS check and the insert fails the foreign key: callers
// try the batch again, and then it leaves that feature out. Sums saturate
// at the largest bigint.
const upsertExposures = `
	INSERT INTO exposures AS e (feature_id, version, bucket, hour, count)
	SELECT u.feature_id, u.version, u.bucket, u.hour, least(sum(u.count), 9223372036854775807)::bigint
	FROM unnest($1::text[], $2::integer[], $3::text[], $4::bigint[], $5::bigint[]) AS u(feature_id, version, bucket, hour, count)
	WHERE EXISTS (SELECT 1 FROM features f WHERE f.id = u.feature_id)
	GROUP BY u.feature_id, u.version, u.bucket, u.hour
	ORDER BY u.feature_id, u.version, u.bucket COLLATE "C", u.hour
	ON CONFLICT (feature_id, version, bucket, hour) DO UPDATE SET count =
		CASE WHEN e.count > 9223372036854775807 - excluded.count THEN 9223372036854775807
		ELSE e.count + excluded.count END`

// exposureColumns are counts as the arrays of upsertExposures.
type exposureColumns struct {
	ids, buckets []string
	vers         []int32
	hours, ns    []int64
}

func (c exposureColumns) len() int { return len(c.ids) }

// exposureColumnsOf returns counts as the arrays of upsertExposures,
// leaving out zero counts. A version that an integer cannot hold, or a
// negative count, is refused (EInvalid) rather than truncated.
func exposureColumnsOf(counts []rollout.Exposure) (exposureColumns, error) {
	var c exposureColumns
	for _, e := range counts {
		if e.Version < 1 || e.Version > math.MaxInt32 || e.Count < 0 {
			return exposureColumns{}, rollout.Errorf(rollout.EInvalid, "exposures of feature %q: version %d or count %d out of range", e.FeatureID, e.Version, e.Count)
		}
		if e.Count == 0 {
			continue
		}
		c.ids = append(c.ids, e.FeatureID)
		c.vers = append(c.vers, int32(e.Version))
		c.buckets = append(c.buckets, e.Bucket)
		c.hours = append(c.hours, hourOf(e.Hour))
		c.ns = append(c.ns, e.Count)
	}
	return c, nil
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

// Exposures returns the stored counts of the feature key, newest version
// first, then by bucket and hour.
func (db *DB) Exposures(ctx context.Context, key string) ([]rollout.Exposure, error) {
	var out []rollout.Exposure
	err := db.readTx(ctx, fmt.Sprintf("exposures of %q", key), func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT f.id, e.version, e.bucket, e.hour, greatest(e.count, 0)
			FROM exposures e JOIN features f ON f.id = e.feature_id
			WHERE f.key = $1
			ORDER BY e.version DESC, e.bucket COLLATE "C", e.hour`, key)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rollout.Exposure, error) {
			e := rollout.Exposure{Feature: key}
			var hour int64
			err := row.Scan(&e.FeatureID, &e.Version, &e.Bucket, &hour, &e.Count)
			e.Hour = timeOfHour(hour)
			return e, err
		})
		return err
	})
	return out, err
}

// AddExposureBatch adds the counts as AddExposures does, in the same
// transaction as it records the batch ID, received at at; a batch whose ID
// is recorded adds nothing and returns false. Two handles sending one
// batch at once: the second waits on the first's row and then finds it.
// IDs received rollout.ExposureBatchMemory before at are removed.
func (db *DB) AddExposureBatch(ctx context.Context, batch string, at time.Time, counts []rollout.Exposure) (bool, error) {
	cols, err := exposureColumnsOf(counts)
	if err != nil {
		return false, err
	}
	var added bool
	for range 3 {
		added = false
		err = db.writeTx(ctx, fmt.Sprintf("add exposure batch %q", batch), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `DELETE FROM exposure_batches WHERE received_at < $1`,
				at.Add(-rollout.ExposureBatchMemory)); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO exposure_batches (id, received_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
				batch, at)
			if err != nil || tag.RowsAffected() == 0 {
				return err // seen already: nothing to add
			}
			added = true
			if cols.len() == 0 {
				return nil
			}
			_, err = tx.Exec(ctx, upsertExposures, cols.ids, cols.vers, cols.buckets, cols.hours, cols.ns)
			return err
		})
		if code, _ := sqlState(err); code != foreignKeyViolation {
			break
		}
	}
	return added && err == nil, err
}
