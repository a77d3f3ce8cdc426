package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout"
)

// ApplyBatch writes every write of ws in one write transaction, or none of
// them: each update replaces its feature, which must be at version
// Feature.Version-1 (and have Feature.ID, when given), each create stores a
// new feature; every write appends its history entry and records its
// commit. A feature that has moved on, or that a create finds already
// there, fails the whole batch with rollout.EConflict naming it; an update
// of a feature that does not exist with rollout.ENotFound. Nothing is
// stored then.
func (db *DB) ApplyBatch(ctx context.Context, ws []rollout.BatchWrite) error {
	for _, w := range ws {
		if w.Version.Version != w.Feature.Version {
			return fmt.Errorf("apply batch: history entry of feature %q is version %d, feature is version %d", w.Feature.Key, w.Version.Version, w.Feature.Version)
		}
		if w.Create && w.Feature.Version != 1 {
			return fmt.Errorf("apply batch: new feature %q is at version %d, not 1", w.Feature.Key, w.Feature.Version)
		}
	}
	return db.writeTx(ctx, fmt.Sprintf("apply a batch of %d feature versions", len(ws)), func(tx *tx) error {
		for _, w := range ws {
			if err := tx.writeBatched(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeBatched writes one write of a batch.
func (tx *tx) writeBatched(w rollout.BatchWrite) error {
	if !w.Create {
		// writeVersion, as insertVersion below, records the version's
		// audit event in the batch's transaction.
		return tx.writeVersion(w.Feature, w.Version)
	}
	f := w.Feature
	if f.ID == "" {
		f.ID = uuid.NewString()
	}
	if err := tx.insertFeature(f); err != nil {
		if rollout.ErrorCode(err) == rollout.EConflict {
			return rollout.Errorf(rollout.EConflict, "feature %q was created meanwhile: it exists already", f.Key)
		}
		return err
	}
	if err := tx.insertVersion(f.ID, f.Key, w.Version); err != nil {
		return err
	}
	return tx.addCommit(rollout.CommitFeature, f.Key, tx.db.now())
}
