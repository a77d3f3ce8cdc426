package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// ApplyBatch writes every write of ws in one write transaction, or none of
// them: each update replaces its feature, which must be at version
// Feature.Version-1 (and have Feature.ID, when given), each create stores a
// new feature; every write appends its history entry and records its
// commit. A feature that has moved on, or that a create finds already
// there, fails the whole batch with feature.EConflict naming it; an update
// of a feature that does not exist with feature.ENotFound. Nothing is
// stored then.
//
// Each segment write of segs, written before the features, replaces its
// segment (stored at the version below) or creates it, appends its history
// entry and its audit event (rollout.SegmentEvent) and records its commit,
// as UpdateSegment and CreateSegment do.
func (db *DB) ApplyBatch(ctx context.Context, ws []rollout.BatchWrite, segs ...rollout.SegmentWrite) error {
	for _, w := range segs {
		if w.Version.Version != w.Segment.Version || w.Create && w.Segment.Version != 1 {
			return fmt.Errorf("apply batch: segment %q is at version %d, its history entry %d (create: %v)", w.Segment.Key, w.Segment.Version, w.Version.Version, w.Create)
		}
	}
	for _, w := range ws {
		if w.Version.Version != w.Feature.Version {
			return fmt.Errorf("apply batch: history entry of feature %q is version %d, feature is version %d", w.Feature.Key, w.Version.Version, w.Feature.Version)
		}
		if w.Create && w.Feature.Version != 1 {
			return fmt.Errorf("apply batch: new feature %q is at version %d, not 1", w.Feature.Key, w.Feature.Version)
		}
	}
	return db.writeTx(ctx, fmt.Sprintf("apply a batch of %d feature and %d segment versions", len(ws), len(segs)), func(tx *tx) error {
		for _, w := range segs {
			if err := tx.writeBatchedSegment(w); err != nil {
				return err
			}
		}
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
		if feature.ErrorCode(err) == feature.EConflict {
			return feature.Errorf(feature.EConflict, "feature %q was created meanwhile: it exists already", f.Key)
		}
		return err
	}
	if err := tx.insertVersion(f.ID, f.Key, w.Version); err != nil {
		return err
	}
	return tx.addCommit(rollout.CommitFeature, f.Key, tx.db.now())
}

// writeBatchedSegment writes one segment write of a batch.
func (tx *tx) writeBatchedSegment(w rollout.SegmentWrite) error {
	s := w.Segment
	config, err := encodeSegment(s)
	if err != nil {
		return err
	}
	kind := rollout.AuditSegmentChange
	if w.Create {
		kind = rollout.AuditSegmentCreate
		_, err := tx.exec(`INSERT INTO segments (key, version, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
			s.Key, s.Version, config, tx.db.d.Time(s.CreatedAt), tx.db.d.Time(s.UpdatedAt))
		switch tx.constraint(err) {
		case Unique, PrimaryKey:
			return feature.Errorf(feature.EConflict, "segment %q was created meanwhile: it exists already", s.Key)
		}
		if err != nil {
			return err
		}
	} else {
		n, err := tx.affected(`UPDATE segments SET version = ?, config = ?, updated_at = ? WHERE key = ? AND version = ?`,
			s.Version, config, tx.db.d.Time(s.UpdatedAt), s.Key, s.Version-1)
		if err != nil {
			return err
		}
		if n == 0 {
			return tx.whySegmentNotWritten(s.Key, s.Version-1)
		}
	}
	if err := tx.insertSegmentVersion(w.Version); err != nil {
		return err
	}
	if err := tx.appendAudit(rollout.SegmentEvent(kind, w.Version)); err != nil {
		return err
	}
	return tx.addCommit(rollout.CommitSegment, s.Key, tx.db.now())
}
