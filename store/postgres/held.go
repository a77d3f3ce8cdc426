package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// UpdateFeatureWith reads the feature key and writes the version next makes
// of it, holding the feature's row (SELECT … FOR UPDATE) from before the
// read to the commit: a write of the feature by any other process waits
// for it, and none comes between. The read (findFeature, as Feature
// reads), a statement of its own in a READ COMMITTED transaction, sees
// every write committed before the row was held. It returns
// rollout.ENotFound when there is no such feature, and next's error as is.
func (db *DB) UpdateFeatureWith(ctx context.Context, key string, next func(cur rollout.Feature) (rollout.Feature, rollout.Version, error)) error {
	return db.writeTx(ctx, fmt.Sprintf("update feature %q", key), func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM features WHERE key = $1 FOR UPDATE`, key).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return rollout.Errorf(rollout.ENotFound, "feature %q does not exist", key)
		}
		if err != nil {
			return err
		}
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
		config, err := encodeFeature(f)
		if err != nil {
			return err
		}
		return db.updateFeature(ctx, tx, f, config, v)
	})
}
