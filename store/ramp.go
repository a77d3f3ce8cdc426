package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/request"
)

// CreateRamp stores the new ramp r; with approval, it marks that change
// request applied (feature.EConflict when it is no longer open); with
// settle, it settles that idempotency key. It returns feature.EConflict
// when the feature has a live ramp already or the ID is taken.
func (db *DB) CreateRamp(ctx context.Context, r ramp.Ramp, approval *request.Decision, settle *idempotency.Settlement) error {
	body, err := encodeJSON(r)
	if err != nil {
		return fmt.Errorf("create ramp of feature %q: %w", r.Feature, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("create ramp of feature %q", r.Feature), func(tx *tx) error {
		_, err := tx.exec(`
			INSERT INTO ramps (id, environment, feature_key, state, revision, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.ID, tx.env(), r.Feature, string(r.State), r.Revision, body, db.d.Time(r.CreatedAt))
		switch tx.constraint(err) {
		case Unique:
			return feature.Errorf(feature.EConflict, "feature %q has a live ramp already: cancel it first", r.Feature)
		case PrimaryKey:
			return feature.Errorf(feature.EConflict, "a ramp with ID %q already exists", r.ID)
		}
		if err != nil {
			return err
		}
		if err := tx.appendAudit(ramp.CreateEvent(r)); err != nil {
			return err
		}
		if approval != nil {
			if err := tx.approveRequest(approval, r.CreatedAt, func(req *request.Request) { req.AppliedRamp = r.ID }); err != nil {
				return err
			}
		}
		return tx.settle(settle)
	})
}

// Ramp returns the ramp id; feature.ENotFound when there is none.
func (db *DB) Ramp(ctx context.Context, id string) (ramp.Ramp, error) {
	var r ramp.Ramp
	err := db.readTx(ctx, fmt.Sprintf("read ramp %q", id), func(tx *tx) (err error) {
		r, err = tx.findRamp(id)
		return err
	})
	return r, err
}

// Ramps returns the ramps of the feature key, every feature's when key is
// "", oldest first.
func (db *DB) Ramps(ctx context.Context, key string) ([]ramp.Ramp, error) {
	var rs []ramp.Ramp
	err := db.readTx(ctx, "list ramps", func(tx *tx) error {
		rows, err := tx.query(`
			SELECT body, revision FROM ramps
			WHERE environment = ? AND (CAST(? AS TEXT) = '' OR feature_key = ?)
			ORDER BY created_at, id{C}`, tx.env(), key, key)
		rs, err = collect(rows, err, scanRamp)
		return err
	})
	return rs, err
}

// UpdateRamp replaces the ramp r.ID, which must be at revision
// r.Revision-1, with r, and settles settle when it is not nil. It returns
// feature.ENotFound when there is no such ramp and feature.EConflict when
// it has moved on.
func (db *DB) UpdateRamp(ctx context.Context, r ramp.Ramp, settle *idempotency.Settlement) error {
	return db.writeTx(ctx, fmt.Sprintf("update ramp %q", r.ID), func(tx *tx) error {
		if err := tx.updateRamp(r, true); err != nil {
			return err
		}
		return tx.settle(settle)
	})
}

// ApplyRampStep writes the feature f with its history entry v, as
// UpdateFeature does (settling v.Settles), and the ramp r, as UpdateRamp
// does, in one transaction: both or neither.
func (db *DB) ApplyRampStep(ctx context.Context, f feature.Feature, v rollout.Version, r ramp.Ramp) error {
	if v.Version != f.Version {
		return fmt.Errorf("apply ramp step to feature %q: history entry is version %d, feature is version %d", f.Key, v.Version, f.Version)
	}
	return db.writeTx(ctx, fmt.Sprintf("apply ramp %q to feature %q", r.ID, f.Key), func(tx *tx) error {
		// The ramp's row first: of two transactions racing for one step,
		// the second waits on it and then finds the revision moved on.
		if err := tx.updateRamp(r, false); err != nil {
			return err
		}
		if err := tx.writeVersion(f, v); err != nil { // its version's audit event records the step
			return err
		}
		return tx.settle(v.Settles)
	})
}

func (tx *tx) findRamp(id string) (ramp.Ramp, error) {
	rows, err := tx.query(`SELECT body, revision FROM ramps WHERE environment = ? AND id = ?`, tx.env(), id)
	return first(rows, err, scanRamp, feature.Errorf(feature.ENotFound, "ramp %q does not exist", id))
}

func scanRamp(rows *sql.Rows) (ramp.Ramp, error) {
	var (
		r        ramp.Ramp
		body     string
		revision int
	)
	if err := rows.Scan(&body, &revision); err != nil {
		return ramp.Ramp{}, err
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return ramp.Ramp{}, fmt.Errorf("decode ramp: %w", err)
	}
	r.Revision = revision
	return r, nil
}

// updateRamp writes r over the stored ramp at revision r.Revision-1 and,
// when audit is set, records the update's audit event (ramp.Event:
// a pause, resume, cancel or step, by r.UpdatedBy or the ramp itself).
func (tx *tx) updateRamp(r ramp.Ramp, audit bool) error {
	body, err := encodeJSON(r)
	if err != nil {
		return err
	}
	var prev ramp.Ramp
	if audit {
		if prev, err = tx.findRamp(r.ID); err != nil && feature.ErrorCode(err) != feature.ENotFound {
			return err
		}
	}
	res, err := tx.exec(`
		UPDATE ramps SET state = ?, revision = ?, body = ?
		WHERE environment = ? AND id = ? AND revision = ?`,
		string(r.State), r.Revision, body, tx.env(), r.ID, r.Revision-1)
	if tx.constraint(err) == Unique {
		return feature.Errorf(feature.EConflict, "feature %q has another live ramp: cancel it first", r.Feature)
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		if err != nil || !audit {
			return err
		}
		if e, ok := ramp.Event(prev, r, r.UpdatedBy, r.UpdatedAt); ok {
			return tx.appendAudit(e)
		}
		return nil
	}
	var stored int
	err = tx.queryRow(`SELECT revision FROM ramps WHERE environment = ? AND id = ?`, tx.env(), r.ID).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return feature.Errorf(feature.ENotFound, "ramp %q does not exist", r.ID)
	}
	if err != nil {
		return err
	}
	return feature.Errorf(feature.EConflict, "ramp %q is at revision %d, not %d: reload it and try again", r.ID, stored, r.Revision-1)
}
