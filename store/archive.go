package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/request"
)

// ArchiveFeature archives the served feature key, which must be at the
// given version: it stays, with its history, exposures and audit events,
// but Features and Feature leave it out. It records e (with the feature's
// ID and version) and a commit of the feature, so that other instances
// drop it; with an approval, it marks that change request applied; with
// settle, it settles it. Its pending schedules, here and elsewhere, are
// canceled (each with its audit event). It returns feature.ENotFound when no feature key
// is served and feature.EConflict when it is at another version.
func (db *DB) ArchiveFeature(ctx context.Context, key string, version int, e audit.Event, approval *request.Decision, settle *idempotency.Settlement) error {
	return db.writeTx(ctx, fmt.Sprintf("archive feature %q", key), func(tx *tx) error {
		now := db.now()
		if e.Time.IsZero() {
			e.Time = now
		}
		var id string
		err := tx.queryRow(`
			UPDATE features SET archived_at = ?
			WHERE environment = ? AND key = ? AND version = ? AND archived_at IS NULL
			RETURNING id`, db.d.Time(e.Time), tx.env(), key, version).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return tx.whyNotWritten(key, "", version)
		}
		if err != nil {
			return err
		}
		e.Feature, e.FeatureID, e.Version = key, id, version
		if e.Kind == "" {
			e.Kind = audit.Archive
		}
		if err := tx.appendAudit(e); err != nil {
			return err
		}
		if err := tx.cancelSchedules(key, e.Actor, "the feature was archived", e.Time); err != nil {
			return err
		}
		if approval != nil {
			if err := tx.approveRequest(approval, e.Time, func(r *request.Request) { r.AppliedVersion = 0 }); err != nil {
				return err
			}
		}
		if err := tx.addCommit(rollout.CommitFeature, key, now); err != nil {
			return err
		}
		if err := tx.archiveElsewhere(key, e); err != nil {
			return err
		}
		return tx.settle(settle)
	})
}

// archiveElsewhere archives the feature key in every other environment
// that serves it, as the transaction's environment did with audit event
// e: a feature is archived, restored and purged everywhere at once. Each
// gets an audit event like e, with its own version and churn.
func (tx *tx) archiveElsewhere(key string, e audit.Event) error {
	others, err := tx.otherEnvironments(key)
	if err != nil {
		return err
	}
	for _, env := range others {
		in := tx.in(env)
		cur, err := in.findFeature(key)
		if err != nil {
			return err
		}
		if _, err := in.exec(`UPDATE features SET archived_at = ? WHERE id = ?`, tx.db.d.Time(e.Time), cur.ID); err != nil {
			return err
		}
		gone := cur.Clone()
		gone.Enabled, gone.Fallback = false, ""
		churn := feature.Compile(gone, nil).ReportFrom(feature.Compile(cur, nil)).Churn
		ev := e
		ev.FeatureID, ev.Version, ev.Churn, ev.Summary = cur.ID, cur.Version, &churn, e.Summary+" (archived in "+tx.env()+")"
		if err := in.appendAudit(ev); err != nil {
			return err
		}
		if err := in.cancelSchedules(key, e.Actor, "the feature was archived", e.Time); err != nil {
			return err
		}
		if err := in.addCommit(rollout.CommitFeature, key, tx.db.now()); err != nil {
			return err
		}
	}
	return nil
}

// restoreElsewhere serves the feature key again in every other environment
// where it is archived, each with the configuration it had there, as a
// new version like v (its own number and report).
func (tx *tx) restoreElsewhere(key string, v rollout.Version) error {
	others, err := tx.otherEnvironmentsWhere(key, "f.archived_at IS NOT NULL")
	if err != nil {
		return err
	}
	for _, env := range others {
		in := tx.in(env)
		old, err := in.findArchived(key)
		if err != nil {
			return err
		}
		next := old.Clone()
		next.Version, next.UpdatedAt = old.Version+1, v.Time
		rep := feature.Compile(next, nil).ReportFrom(nil)
		rep.FromVersion = old.Version
		ov := rollout.Version{Version: next.Version, Actor: v.Actor, Time: v.Time, Comment: v.Comment, Kind: v.Kind,
			Summary: v.Summary + " (restored in " + tx.env() + ")", Config: next, OverrideCount: len(next.Overrides), Report: rep}
		if _, err := in.exec(`UPDATE features SET archived_at = NULL WHERE id = ?`, next.ID); err != nil {
			return err
		}
		if err := in.writeOwn(next, ov); err != nil {
			return err
		}
	}
	return nil
}

// ArchivedFeatures returns the archived features, ordered by key.
func (db *DB) ArchivedFeatures(ctx context.Context) ([]feature.Feature, error) {
	var fs []feature.Feature
	err := db.readTx(ctx, "list archived features", func(tx *tx) error {
		rows, err := tx.query(`SELECT id, key, version, config FROM features WHERE environment = ? AND archived_at IS NOT NULL ORDER BY key{C}`, tx.env())
		fs, err = collect(rows, err, scanFeature)
		return err
	})
	return fs, err
}

// ArchivedFeature returns the archived feature key. It returns
// feature.ENotFound when there is no feature key and feature.EConflict
// when it is served.
func (db *DB) ArchivedFeature(ctx context.Context, key string) (feature.Feature, error) {
	var f feature.Feature
	err := db.readTx(ctx, fmt.Sprintf("read archived feature %q", key), func(tx *tx) (err error) {
		f, err = tx.findArchived(key)
		return err
	})
	return f, err
}

func (tx *tx) findArchived(key string) (feature.Feature, error) {
	var archived bool
	err := tx.queryRow(`SELECT archived_at IS NOT NULL FROM features WHERE environment = ? AND key = ?`, tx.env(), key).Scan(&archived)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return feature.Feature{}, feature.Errorf(feature.ENotFound, "feature %q does not exist, archived or not", key)
	case err != nil:
		return feature.Feature{}, err
	case !archived:
		return feature.Feature{}, feature.Errorf(feature.EConflict, "feature %q is not archived: it is served", key)
	}
	rows, err := tx.query(`SELECT id, key, version, config FROM features WHERE environment = ? AND key = ?`, tx.env(), key)
	return first(rows, err, scanFeature, feature.Errorf(feature.ENotFound, "feature %q does not exist", key))
}

// RestoreFeature serves the archived feature of f's key again as f, which
// must follow the stored version (f.Version-1) and keep its ID, appending
// v (whose audit event, of v.Kind, it records) and a commit, and settles
// v.Settles. It returns
// feature.ENotFound when there is no feature key and feature.EConflict
// when it is served or moved on.
func (db *DB) RestoreFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	if v.Version != f.Version {
		return fmt.Errorf("restore feature %q: history entry is version %d, feature is version %d", f.Key, v.Version, f.Version)
	}
	return db.writeTx(ctx, fmt.Sprintf("restore feature %q", f.Key), func(tx *tx) error {
		cur, err := tx.findArchived(f.Key)
		if err != nil {
			return err
		}
		if cur.ID != f.ID || cur.Version != f.Version-1 {
			return feature.Errorf(feature.EConflict, "archived feature %q is at version %d, not %d: reload it and try again", f.Key, cur.Version, f.Version-1)
		}
		if _, err := tx.exec(`UPDATE features SET archived_at = NULL WHERE id = ?`, f.ID); err != nil {
			return err
		}
		if err := tx.writeVersion(f, v); err != nil {
			return err
		}
		if err := tx.restoreElsewhere(f.Key, v); err != nil {
			return err
		}
		return tx.settle(v.Settles)
	})
}

// PurgeFeature removes the archived feature key: its row, history,
// overrides, exposures (by the foreign keys' cascades), ramps and
// schedules. Its audit
// events stay; e is added (with the feature's ID), and a commit of the
// feature; settle is settled. It returns feature.ENotFound when there is
// no feature key and feature.EConflict when it is served.
func (db *DB) PurgeFeature(ctx context.Context, key string, e audit.Event, settle *idempotency.Settlement) error {
	return db.writeTx(ctx, fmt.Sprintf("purge feature %q", key), func(tx *tx) error {
		if db.d.ForUpdate != "" {
			if _, err := tx.exec(`SELECT 1 FROM features WHERE environment = ? AND key = ? {forUpdate}`, tx.env(), key); err != nil {
				return err
			}
		}
		f, err := tx.findArchived(key)
		if feature.ErrorCode(err) == feature.EConflict {
			return feature.Errorf(feature.EConflict, "feature %q is not archived: archive it first (DELETE /api/features/%s), then purge it", key, key)
		}
		if err != nil {
			return err
		}
		if _, err := tx.exec(`DELETE FROM ramps WHERE environment = ? AND feature_key = ?`, tx.env(), key); err != nil {
			return fmt.Errorf("delete ramps: %w", err)
		}
		if _, err := tx.exec(`DELETE FROM schedules WHERE environment = ? AND feature_key = ?`, tx.env(), key); err != nil {
			return fmt.Errorf("delete schedules: %w", err)
		}
		if _, err := tx.exec(`DELETE FROM features WHERE id = ?`, f.ID); err != nil {
			return err
		}
		e.Feature, e.FeatureID, e.Version = key, f.ID, f.Version
		if e.Kind == "" {
			e.Kind = audit.Purge
		}
		if err := tx.appendAudit(e); err != nil {
			return err
		}
		if err := tx.addCommit(rollout.CommitFeature, key, db.now()); err != nil {
			return err
		}
		if err := tx.purgeElsewhere(key, e); err != nil {
			return err
		}
		return tx.settle(settle)
	})
}

// purgeElsewhere purges the feature key in every other environment, as
// the transaction's environment did with audit event e; EConflict when
// one of them still serves it.
func (tx *tx) purgeElsewhere(key string, e audit.Event) error {
	if served, err := tx.otherEnvironments(key); err != nil {
		return err
	} else if len(served) > 0 {
		return feature.Errorf(feature.EConflict, "feature %q is still served in environment %s: archive it there first, then purge it", key, served[0])
	}
	others, err := tx.otherEnvironmentsWhere(key, "f.archived_at IS NOT NULL")
	if err != nil {
		return err
	}
	for _, env := range others {
		in := tx.in(env)
		f, err := in.findArchived(key)
		if err != nil {
			return err
		}
		if _, err := in.exec(`DELETE FROM ramps WHERE environment = ? AND feature_key = ?`, env, key); err != nil {
			return fmt.Errorf("delete ramps: %w", err)
		}
		if _, err := in.exec(`DELETE FROM schedules WHERE environment = ? AND feature_key = ?`, env, key); err != nil {
			return fmt.Errorf("delete schedules: %w", err)
		}
		if _, err := in.exec(`DELETE FROM features WHERE id = ?`, f.ID); err != nil {
			return err
		}
		ev := e
		ev.FeatureID, ev.Version = f.ID, f.Version
		if err := in.appendAudit(ev); err != nil {
			return err
		}
		if err := in.addCommit(rollout.CommitFeature, key, tx.db.now()); err != nil {
			return err
		}
	}
	return nil
}
