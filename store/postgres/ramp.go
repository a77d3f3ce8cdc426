package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// CreateRamp stores the new ramp r. It returns rollout.EConflict when the
// feature has a live ramp already or the ID is taken.
func (db *DB) CreateRamp(ctx context.Context, r rollout.Ramp) error {
	body, err := encodeJSON(r)
	if err != nil {
		return fmt.Errorf("create ramp of feature %q: %w", r.Feature, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("create ramp of feature %q", r.Feature), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO ramps (id, feature_key, state, revision, body, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`,
			r.ID, r.Feature, string(r.State), r.Revision, body, r.CreatedAt.UTC())
		if code, name := sqlState(err); code == uniqueViolation {
			if name == "ramps_live" {
				return rollout.Errorf(rollout.EConflict, "feature %q has a live ramp already: cancel it first", r.Feature)
			}
			return rollout.Errorf(rollout.EConflict, "a ramp with ID %q already exists", r.ID)
		}
		return err
	})
}

// Ramp returns the ramp id; rollout.ENotFound when there is none.
func (db *DB) Ramp(ctx context.Context, id string) (rollout.Ramp, error) {
	var r rollout.Ramp
	err := db.readTx(ctx, fmt.Sprintf("read ramp %q", id), func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT body, revision FROM ramps WHERE id = $1`, id)
		if err != nil {
			return err
		}
		r, err = pgx.CollectExactlyOneRow(rows, scanRamp)
		if errors.Is(err, pgx.ErrNoRows) {
			return rollout.Errorf(rollout.ENotFound, "ramp %q does not exist", id)
		}
		return err
	})
	return r, err
}

// Ramps returns the ramps of the feature key, every feature's when key is
// "", oldest first.
func (db *DB) Ramps(ctx context.Context, key string) ([]rollout.Ramp, error) {
	var rs []rollout.Ramp
	err := db.readTx(ctx, "list ramps", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT body, revision FROM ramps
			WHERE $1 = '' OR feature_key = $1
			ORDER BY created_at, id COLLATE "C"`, key)
		if err != nil {
			return err
		}
		rs, err = pgx.CollectRows(rows, scanRamp)
		return err
	})
	if rs == nil && err == nil {
		rs = []rollout.Ramp{}
	}
	return rs, err
}

// UpdateRamp replaces the ramp r.ID, which must be at revision
// r.Revision-1, with r. It returns rollout.ENotFound when there is no such
// ramp and rollout.EConflict when it has moved on.
func (db *DB) UpdateRamp(ctx context.Context, r rollout.Ramp) error {
	return db.writeTx(ctx, fmt.Sprintf("update ramp %q", r.ID), func(tx pgx.Tx) error {
		return updateRamp(ctx, tx, r)
	})
}

// ApplyRampStep writes the feature f with its history entry v, as
// UpdateFeature does, and the ramp r, as UpdateRamp does, in one
// transaction: both or neither.
func (db *DB) ApplyRampStep(ctx context.Context, f rollout.Feature, v rollout.Version, r rollout.Ramp) error {
	if v.Version != f.Version {
		return fmt.Errorf("apply ramp step to feature %q: history entry is version %d, feature is version %d", f.Key, v.Version, f.Version)
	}
	config, err := encodeFeature(f)
	if err != nil {
		return fmt.Errorf("apply ramp step to feature %q: %w", f.Key, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("apply ramp %q to feature %q", r.ID, f.Key), func(tx pgx.Tx) error {
		// The ramp's row first: of two transactions racing for one step,
		// the second waits on it and then finds the revision moved on.
		if err := updateRamp(ctx, tx, r); err != nil {
			return err
		}
		return db.updateFeature(ctx, tx, f, config, v)
	})
}

func scanRamp(row pgx.CollectableRow) (rollout.Ramp, error) {
	var (
		r        rollout.Ramp
		body     string
		revision int
	)
	if err := row.Scan(&body, &revision); err != nil {
		return rollout.Ramp{}, err
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return rollout.Ramp{}, fmt.Errorf("decode ramp: %w", err)
	}
	r.Revision = revision
	return r, nil
}

func updateRamp(ctx context.Context, tx pgx.Tx, r rollout.Ramp) error {
	body, err := encodeJSON(r)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, `
		UPDATE ramps SET state = $1, revision = $2, body = $3
		WHERE id = $4 AND revision = $5`,
		string(r.State), r.Revision, body, r.ID, r.Revision-1)
	if code, _ := sqlState(err); code == uniqueViolation {
		return rollout.Errorf(rollout.EConflict, "feature %q has another live ramp: cancel it first", r.Feature)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var stored int
	err = tx.QueryRow(ctx, `SELECT revision FROM ramps WHERE id = $1`, r.ID).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return rollout.Errorf(rollout.ENotFound, "ramp %q does not exist", r.ID)
	}
	if err != nil {
		return err
	}
	return rollout.Errorf(rollout.EConflict, "ramp %q is at revision %d, not %d: reload it and try again", r.ID, stored, r.Revision-1)
}
