package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
)

// Distinct users are kept in exposure_users as HyperLogLog sketches per
// feature, version, bucket and hour (package hll's binary form), and per
// feature, version and bucket for every hour (hour 0): a flush merges its
// sketches into both, by register maximum, so that the counts of any
// number of instances and apps add up to distinct users, and a batch
// merged twice changes nothing. Hourly rows older than UsersHoursKept are
// removed by the flushes.

// UsersHoursKept is how long hourly sketches are kept: enough for the
// users of the last 24 hours, and a day's margin.
const UsersHoursKept = 48 * time.Hour

// userRow is one sketch to merge.
type userRow struct {
	id, bucket string
	version    int32
	hour       int64
	users      *hll.Sketch
}

// userRows returns the sketches of counts merged per feature, version,
// bucket and hour, and per feature, version and bucket at hour 0, sorted
// (so that concurrent writers lock rows in one order). Malformed sketches
// are refused (EInvalid).
func userRows(counts []feature.Exposure) ([]userRow, error) {
	type key struct {
		id, bucket string
		version    int32
		hour       int64
	}
	merged := map[key]*hll.Sketch{}
	for _, e := range counts {
		if e.Users == nil || e.Version < 1 {
			continue
		}
		for _, hour := range []int64{hourOf(e.Hour), 0} {
			k := key{e.FeatureID, e.Bucket, int32(e.Version), hour}
			if merged[k] == nil {
				merged[k] = new(hll.Sketch)
			}
			if err := merged[k].UnmarshalBinary(e.Users); err != nil {
				return nil, feature.Errorf(feature.EInvalid, "users of feature %q: %v", e.FeatureID, err)
			}
			if hour == 0 {
				break
			}
		}
	}
	rows := make([]userRow, 0, len(merged))
	for k, s := range merged {
		rows = append(rows, userRow{k.id, k.bucket, k.version, k.hour, s})
	}
	slices.SortFunc(rows, func(a, b userRow) int {
		return cmp.Or(strings.Compare(a.id, b.id), cmp.Compare(a.version, b.version), strings.Compare(a.bucket, b.bucket), cmp.Compare(a.hour, b.hour))
	})
	return rows, nil
}

// addUsers merges rows into exposure_users: it makes the rows that are
// missing (the column's default is an empty sketch), locks and reads them, and writes back the merges. Rows
// of features deleted meanwhile are left out. Hourly rows older than
// UsersHoursKept before the newest hour of rows are removed.
func (tx *tx) addUsers(rows []userRow) error {
	if len(rows) == 0 {
		return nil
	}
	var newest int64
	for part := range slices.Chunk(rows, chunk) {
		args := make([]any, 0, 4*len(part))
		for _, r := range part {
			args = append(args, r.id, r.version, r.bucket, r.hour)
			newest = max(newest, r.hour)
		}
		const row = "(CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS BIGINT))"
		if _, err := tx.exec(`
			INSERT INTO exposure_users (feature_id, version, bucket, hour)
			SELECT v.column1, v.column2, v.column3, v.column4
			FROM (VALUES `+row+strings.Repeat(", "+row, len(part)-1)+`) AS v
			WHERE EXISTS (SELECT 1 FROM features f WHERE f.id = v.column1)
			ORDER BY v.column1, v.column2, v.column3{C}, v.column4
			ON CONFLICT (feature_id, version, bucket, hour) DO NOTHING`, args...); err != nil {
			return err
		}
	}
	for _, r := range rows {
		var stored []byte
		err := tx.queryRow(`SELECT sketch FROM exposure_users WHERE feature_id = ? AND version = ? AND bucket = ? AND hour = ? {forUpdate}`,
			r.id, r.version, r.bucket, r.hour).Scan(&stored)
		if err == sql.ErrNoRows {
			continue // the feature was deleted
		}
		if err != nil {
			return err
		}
		_ = r.users.UnmarshalBinary(stored) // a malformed row is overwritten
		if _, err := tx.exec(`UPDATE exposure_users SET sketch = ? WHERE feature_id = ? AND version = ? AND bucket = ? AND hour = ?`,
			r.users.Append(nil), r.id, r.version, r.bucket, r.hour); err != nil {
			return err
		}
	}
	if newest > 0 {
		_, err := tx.exec(`DELETE FROM exposure_users WHERE hour > 0 AND hour < ?`, newest-int64(UsersHoursKept/time.Second))
		return err
	}
	return nil
}

// ExposureUsers returns the distinct users of the feature key as stored:
// per version and bucket for every hour (Hour zero), and per hour for the
// hours from since's on; each Exposure's Users is the sketch.
func (db *DB) ExposureUsers(ctx context.Context, key string, since time.Time) ([]feature.Exposure, error) {
	var out []feature.Exposure
	err := db.readTx(ctx, fmt.Sprintf("users of %q", key), func(tx *tx) error {
		rows, err := tx.query(`
			SELECT f.id, u.version, u.bucket, u.hour, u.sketch
			FROM exposure_users u JOIN features f ON f.id = u.feature_id
			WHERE f.environment = ? AND f.key = ? AND (u.hour = 0 OR u.hour >= ?)
			ORDER BY u.version DESC, u.bucket{C}, u.hour`, tx.env(), key, hourOf(since))
		out, err = collect(rows, err, func(rows *sql.Rows) (feature.Exposure, error) {
			e := feature.Exposure{Feature: key}
			var hour int64
			err := rows.Scan(&e.FeatureID, &e.Version, &e.Bucket, &hour, &e.Users)
			e.Hour = timeOfHour(hour)
			return e, err
		})
		return err
	})
	return out, err
}
