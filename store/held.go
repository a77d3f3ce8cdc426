package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rollout/rollout/rollout"
)

// UpdateFeatureWith reads the feature key and writes the version next makes
// of it, in one write transaction. Write transactions begin IMMEDIATE, so
// the transaction holds SQLite's write lock from before the read: no other
// write, from this process or another, comes between. The read
// (findFeature, as Feature reads) sees the last commit. It returns
// rollout.ENotFound when there is no such feature, and next's error as is.
func (db *DB) UpdateFeatureWith(ctx context.Context, key string, next func(cur rollout.Feature) (rollout.Feature, rollout.Version, error)) error {
	return db.writeTx(ctx, fmt.Sprintf("update feature %q", key), func(tx *sql.Tx) error {
		cur, err := findFeature(ctx, tx, key)
		if err != nil {
			return err
		}
		f, v, err := next(cur)
		if err != nil {
			return err
		}
		if v.Version != f.Version {
			return fmt.Errorf("history entry is version %d, feature is version %d", v.Version, f.Version)
		}
		return db.writeVersion(ctx, tx, f, v)
	})
}
