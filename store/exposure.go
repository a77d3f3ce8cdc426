package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// Exposures are kept as one total per feature, version, bucket and hour
// (Unix seconds of the hour's start; 0 for totals from before hours were
// kept). Totals saturate at math.MaxInt64, so that a flush never fails on
// a total that would overflow (SQLite would turn it into a float, which
// the table's CHECK refuses).

// AddExposures adds the counts to the stored ones in one transaction, as
// increments, so that the counts of any number of instances add up.
// Counts of features that no longer exist are dropped.
func (db *DB) AddExposures(ctx context.Context, counts []feature.Exposure) error {
	rows, err := exposureRows(counts)
	if err != nil || len(rows) == 0 {
		return err
	}
	rules := ruleExposureRows(counts)
	users, err := userRows(counts)
	if err != nil {
		return err
	}
	return db.retryDeleted(func() error {
		return db.writeTx(ctx, "add exposures", func(tx *tx) error {
			if err := tx.addExposures(rows); err != nil {
				return err
			}
			if err := tx.addRuleExposures(rules); err != nil {
				return err
			}
			return tx.addUsers(users)
		})
	})
}

// AddExposureBatch adds the counts as AddExposures does, in the same
// transaction as it records the batch ID, received at at; a batch whose ID
// is recorded adds nothing and returns false. Two handles sending one
// batch at once: the second waits for the first and then finds it. IDs
// received rollout.ExposureBatchMemory before at are removed.
func (db *DB) AddExposureBatch(ctx context.Context, batch string, at time.Time, counts []feature.Exposure) (bool, error) {
	rows, err := exposureRows(counts)
	if err != nil {
		return false, err
	}
	rules := ruleExposureRows(counts)
	users, err := userRows(counts)
	if err != nil {
		return false, err
	}
	var added bool
	err = db.retryDeleted(func() error {
		return db.writeTx(ctx, fmt.Sprintf("add exposure batch %q", batch), func(tx *tx) error {
			added = false
			if _, err := tx.exec(`DELETE FROM exposure_batches WHERE received_at < ?`,
				db.d.Seconds(at.Add(-rollout.ExposureBatchMemory))); err != nil {
				return err
			}
			n, err := tx.affected(`INSERT INTO exposure_batches (id, received_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`,
				batch, db.d.Seconds(at))
			if err != nil || n == 0 {
				return err // seen already: nothing to add
			}
			added = true
			if err := tx.addExposures(rows); err != nil {
				return err
			}
			if err := tx.addRuleExposures(rules); err != nil {
				return err
			}
			return tx.addUsers(users)
		})
	})
	return added && err == nil, err
}

// retryDeleted runs write up to three times while it fails on a foreign
// key: a feature deleted by another transaction after the check that it
// exists. The next try leaves that feature out.
func (db *DB) retryDeleted(write func() error) error {
	var err error
	for range 3 {
		if err = write(); err == nil || db.d.Constraint(err) != ForeignKey {
			break
		}
	}
	return err
}

// Exposures returns the stored counts of the feature key, newest version
// first, then by bucket and hour. A count that is not a whole number from
// 0 to math.MaxInt64 (a float that an overflowing sum left in SQLite before
// totals saturated) reads as the nearest one.
func (db *DB) Exposures(ctx context.Context, key string) ([]feature.Exposure, error) {
	var out []feature.Exposure
	err := db.readTx(ctx, fmt.Sprintf("exposures of %q", key), func(tx *tx) error {
		rows, err := tx.query(`
			SELECT f.id, e.version, e.bucket, e.hour,
				CASE WHEN e.count >= 9223372036854775807 THEN 9223372036854775807
				WHEN e.count <= 0 THEN 0
				ELSE CAST(e.count AS BIGINT) END
			FROM exposures e JOIN features f ON f.id = e.feature_id
			WHERE f.environment = ? AND f.key = ?
			ORDER BY e.version DESC, e.bucket{C}, e.hour`, tx.env(), key)
		out, err = collect(rows, err, func(rows *sql.Rows) (feature.Exposure, error) {
			e := feature.Exposure{Feature: key}
			var hour int64
			err := rows.Scan(&e.FeatureID, &e.Version, &e.Bucket, &hour, &e.Count)
			e.Hour = timeOfHour(hour)
			return e, err
		})
		return err
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// RuleExposures returns the stored counts of the feature key per version,
// rule and hour, for the hours from since's on, newest version first, then
// by rule and hour.
func (db *DB) RuleExposures(ctx context.Context, key string, since time.Time) ([]feature.Exposure, error) {
	var out []feature.Exposure
	err := db.readTx(ctx, fmt.Sprintf("exposures per rule of %q", key), func(tx *tx) error {
		rows, err := tx.query(`
			SELECT f.id, e.version, e.rule, e.hour, e.count
			FROM rule_exposures e JOIN features f ON f.id = e.feature_id
			WHERE f.environment = ? AND f.key = ? AND e.hour >= ?
			ORDER BY e.version DESC, e.rule{C}, e.hour`, tx.env(), key, hourOf(since))
		out, err = collect(rows, err, func(rows *sql.Rows) (feature.Exposure, error) {
			e := feature.Exposure{Feature: key}
			var hour int64
			var rule string
			err := rows.Scan(&e.FeatureID, &e.Version, &rule, &hour, &e.Count)
			e.Hour, e.Rule = timeOfHour(hour), &rule
			return e, err
		})
		return err
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// exposureRow is one total to add.
type exposureRow struct {
	id, bucket  string
	version     int32
	hour, count int64
}

// exposureRows returns counts summed per feature, version, bucket and hour
// (saturating), in that order (buckets by bytes), leaving out zero counts:
// concurrent writers then lock rows in the same order and cannot deadlock,
// and one statement never touches a row twice. A version that an integer
// cannot hold, or a negative count, is refused (EInvalid) rather than
// truncated.
func exposureRows(counts []feature.Exposure) ([]exposureRow, error) {
	var rows []exposureRow
	for _, e := range counts {
		if e.Version < 1 || e.Version > math.MaxInt32 || e.Count < 0 {
			return nil, feature.Errorf(feature.EInvalid, "exposures of feature %q: version %d or count %d out of range", e.FeatureID, e.Version, e.Count)
		}
		if e.Count > 0 {
			rows = append(rows, exposureRow{e.FeatureID, e.Bucket, int32(e.Version), hourOf(e.Hour), e.Count})
		}
	}
	return sumRows(rows), nil
}

// ruleExposureRows is exposureRows per rule (in exposureRow.bucket) for the
// counts whose rule is known, after exposureRows has checked them.
func ruleExposureRows(counts []feature.Exposure) []exposureRow {
	var rows []exposureRow
	for _, e := range counts {
		if e.Rule != nil && e.Count > 0 {
			rows = append(rows, exposureRow{e.FeatureID, *e.Rule, int32(e.Version), hourOf(e.Hour), e.Count})
		}
	}
	return sumRows(rows)
}

// sumRows sorts rows and sums those of one feature, version, bucket and
// hour.
func sumRows(rows []exposureRow) []exposureRow {
	slices.SortFunc(rows, func(a, b exposureRow) int {
		return cmp.Or(strings.Compare(a.id, b.id), cmp.Compare(a.version, b.version), strings.Compare(a.bucket, b.bucket), cmp.Compare(a.hour, b.hour))
	})
	out := rows[:0]
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].id == r.id && out[n-1].version == r.version && out[n-1].bucket == r.bucket && out[n-1].hour == r.hour {
			out[n-1].count = min(out[n-1].count, math.MaxInt64-r.count) + r.count
			continue
		}
		out = append(out, r)
	}
	return out
}

func (tx *tx) addExposures(rows []exposureRow) error {
	return tx.addTotals("exposures", "bucket", rows)
}

// addRuleExposures adds rows (their bucket the rule) to rule_exposures.
func (tx *tx) addRuleExposures(rows []exposureRow) error {
	return tx.addTotals("rule_exposures", "rule", rows)
}

// addTotals adds rows to table, whose totals are per feature, version,
// key column (bucket or rule) and hour.
func (tx *tx) addTotals(table, key string, rows []exposureRow) error {
	for part := range slices.Chunk(rows, chunk) {
		args := make([]any, 0, 5*len(part))
		for _, r := range part {
			args = append(args, r.id, r.version, r.bucket, r.hour, r.count)
		}
		const row = "(CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS BIGINT))"
		if _, err := tx.exec(`
			INSERT INTO `+table+` (feature_id, version, `+key+`, hour, count)
			SELECT v.column1, v.column2, v.column3, v.column4, v.column5
			FROM (VALUES `+row+strings.Repeat(", "+row, len(part)-1)+`) AS v
			WHERE EXISTS (SELECT 1 FROM features f WHERE f.id = v.column1)
			ORDER BY v.column1, v.column2, v.column3{C}, v.column4
			ON CONFLICT (feature_id, version, `+key+`, hour) DO UPDATE SET count =
				CASE WHEN `+table+`.count > 9223372036854775807 - excluded.count THEN 9223372036854775807
				ELSE `+table+`.count + excluded.count END`, args...); err != nil {
			return err
		}
	}
	return nil
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
