package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

// ApplyBatch writes every write of b.Features in one write transaction,
// with those of b.Segments, and settles b.Settles, or none of them: each
// update of b.Features replaces its feature, which must be at version
// Feature.Version-1 (and have Feature.ID, when given), each create stores a
// new feature; every write appends its history entry and records its
// commit. A feature that has moved on, or that a create finds already
// there, fails the whole batch with feature.EConflict naming it; an update
// of a feature that does not exist with feature.ENotFound. Nothing is
// stored then.
//
// Each segment write of b.Segments, written before the features, replaces its
// segment (stored at the version below) or creates it, appends its history
// entry and its audit event (rollout.SegmentEvent) and records its commit,
// as UpdateSegment and CreateSegment do.
func (db *DB) ApplyBatch(ctx context.Context, b rollout.Batch) error {
	ws, segs := b.Features, b.Segments
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
	return db.longWriteTx(ctx, fmt.Sprintf("apply a batch of %d feature and %d segment versions", len(ws), len(segs)), batchAllowance(ws, segs), func(tx *tx) error {
		for _, w := range segs {
			if err := tx.writeBatchedSegment(w); err != nil {
				return err
			}
		}
		// Runs of creates are written together, a few statements for
		// many features; updates one by one, in their order.
		for len(ws) > 0 {
			n := 0
			for n < len(ws) && ws[n].Create && ws[n].Version.Request == nil {
				n++
			}
			if n > 1 {
				if err := tx.createBatched(ws[:n]); err != nil {
					return err
				}
				ws = ws[n:]
				continue
			}
			if err := tx.writeBatched(ws[0]); err != nil {
				return err
			}
			ws = ws[1:]
		}
		return tx.settle(b.Settles)
	})
}

// createBatched writes the creates ws (with no change request) as
// writeBatched does each, with multi-row statements: the features, their
// first versions, overrides, churn reports and audit events, then a commit
// each.
func (tx *tx) createBatched(ws []rollout.BatchWrite) error {
	fs := make([]feature.Feature, len(ws))
	keys := make([]any, len(ws))
	for i, w := range ws {
		fs[i] = w.Feature
		if fs[i].ID == "" {
			fs[i].ID = uuid.NewString()
		}
		keys[i] = fs[i].Key
	}
	// A key taken already, archived or not, is named; asked first, as
	// PostgreSQL reads nothing more in a transaction after a failed insert.
	for part := range slices.Chunk(keys, chunk) {
		var key string
		var archived bool
		err := tx.queryRow(`SELECT key, archived_at IS NOT NULL FROM features WHERE environment = ? AND key IN (?`+strings.Repeat(", ?", len(part)-1)+`) LIMIT 1`, append([]any{tx.env()}, part...)...).Scan(&key, &archived)
		switch {
		case err == nil && archived:
			return feature.Errorf(feature.EConflict, "feature %q is archived, and its key stays taken until it is purged: restore it (POST /api/features/%s/restore) or, as an admin, purge it (DELETE /api/features/%s?purge=true) first", key, key, key)
		case err == nil:
			return feature.Errorf(feature.EConflict, "feature %q was created meanwhile: it exists already", key)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
	}
	const featureColumns, versionColumns, spanColumns, reportColumns = 7, 8, 4, 5
	var args []any
	for part := range slices.Chunk(fs, chunk) {
		args = args[:0]
		for _, f := range part {
			config, err := encodeFeature(f)
			if err != nil {
				return err
			}
			args = append(args, f.ID, tx.env(), f.Key, f.Version, config, tx.db.d.Time(f.CreatedAt), tx.db.d.Time(f.UpdatedAt))
		}
		_, err := tx.exec(`INSERT INTO features (id, environment, key, version, config, created_at, updated_at) VALUES `+rows(featureColumns, len(part)), args...)
		switch tx.constraint(err) {
		case Unique, PrimaryKey:
			return feature.Errorf(feature.EConflict, "a feature of the batch was created meanwhile: it exists already")
		}
		if err != nil {
			return err
		}
	}
	for start := 0; start < len(ws); start += chunk {
		part := ws[start:min(start+chunk, len(ws))]
		versions, reports := make([]any, 0, versionColumns*len(part)), make([]any, 0, reportColumns*len(part))
		for i, w := range part {
			v, id := w.Version, fs[start+i].ID
			config, err := encodeFeature(withoutOverrides(v.Config))
			if err != nil {
				return err
			}
			report, err := encodeJSON(v.Report)
			if err != nil {
				return fmt.Errorf("encode report: %w", err)
			}
			versions = append(versions, id, v.Version, v.Actor, tx.db.d.Time(v.Time), v.Summary, v.Comment, config, len(v.Config.Overrides))
			reports = append(reports, id, v.Version, v.Report.Churn, v.Report.ModuloChurn, report)
		}
		if _, err := tx.exec(`INSERT INTO versions (feature_id, version, actor, created_at, summary, comment, config, override_count) VALUES `+rows(versionColumns, len(part)), versions...); err != nil {
			return fmt.Errorf("insert versions: %w", err)
		}
		if _, err := tx.exec(`INSERT INTO churn_reports (feature_id, version, churn, modulo_churn, report) VALUES `+rows(reportColumns, len(part)), reports...); err != nil {
			return fmt.Errorf("insert reports: %w", err)
		}
	}
	// Every override starts a span at version 1.
	if tx.db.d.InsertSpans != "" {
		var ids, users, buckets []string
		var since []int64
		for i, w := range ws {
			for _, user := range slices.Sorted(maps.Keys(w.Version.Config.Overrides)) {
				ids, users, buckets = append(ids, fs[i].ID), append(users, user), append(buckets, w.Version.Config.Overrides[user])
				since = append(since, int64(w.Version.Version))
			}
		}
		if len(ids) > 0 {
			if _, err := tx.exec(tx.db.d.InsertSpans, ids, users, buckets, since); err != nil {
				return fmt.Errorf("write overrides: %w", err)
			}
		}
		return tx.finishCreates(ws, fs)
	}
	args = args[:0]
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := tx.exec(`INSERT INTO override_spans (feature_id, user_id, bucket, since) VALUES `+rows(spanColumns, len(args)/spanColumns), args...)
		args = args[:0]
		return err
	}
	for i, w := range ws {
		for _, user := range slices.Sorted(maps.Keys(w.Version.Config.Overrides)) {
			args = append(args, fs[i].ID, user, w.Version.Config.Overrides[user], w.Version.Version)
			if len(args) == spanColumns*chunk {
				if err := flush(); err != nil {
					return fmt.Errorf("write overrides: %w", err)
				}
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("write overrides: %w", err)
	}
	return tx.finishCreates(ws, fs)
}

// finishCreates records the audit events and commits of the creates ws of
// the features fs.
func (tx *tx) finishCreates(ws []rollout.BatchWrite, fs []feature.Feature) error {
	events := make([]audit.Event, len(ws))
	for i, w := range ws {
		events[i] = rollout.VersionEvent(fs[i].Key, fs[i].ID, w.Version)
	}
	if err := tx.appendAudits(events); err != nil {
		return err
	}
	for _, f := range fs {
		if err := tx.addCommit(rollout.CommitFeature, f.Key, tx.db.now()); err != nil {
			return err
		}
	}
	return nil
}

// Time a batch may take beyond the DB's timeout: for each version it
// writes, and for each override of those versions (a row each).
const (
	versionAllowance  = 10 * time.Millisecond
	overrideAllowance = 50 * time.Microsecond
)

// batchAllowance is how long the batch of ws and segs may take beyond the
// DB's timeout: the biggest document (1,000 features and 300,000
// overrides) about 25 s more.
func batchAllowance(ws []rollout.BatchWrite, segs []rollout.SegmentWrite) time.Duration {
	d := time.Duration(len(ws)+len(segs)) * versionAllowance
	for _, w := range ws {
		d += time.Duration(len(w.Feature.Overrides)) * overrideAllowance
	}
	return d
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
	for _, p := range w.Version.Elsewhere {
		if err := tx.in(p.Environment).placeFeature(p.Feature, p.Version); err != nil {
			return err
		}
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
	kind := audit.SegmentChange
	if w.Create {
		kind = audit.SegmentCreate
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
