package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"

	"github.com/rollout/rollout/rollout"
)

// CreateRamp stores the new ramp r. It returns rollout.EConflict when the
// feature has a live ramp already or the ID is taken.
func (db *DB) CreateRamp(ctx context.Context, r rollout.Ramp) error {
	body, err := encodeJSON(r)
	if err != nil {
		return fmt.Errorf("create ramp of feature %q: %w", r.Feature, err)
	}
	return db.writeTx(ctx, fmt.Sprintf("create ramp of feature %q", r.Feature), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO ramps (id, feature_key, state, revision, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`,
			r.ID, r.Feature, string(r.State), r.Revision, body, formatTime(r.CreatedAt))
		switch constraint(err) {
		case sqlite3.ErrConstraintUnique:
			return rollout.Errorf(rollout.EConflict, "feature %q has a live ramp already: cancel it first", r.Feature)
		case sqlite3.ErrConstraintPrimaryKey:
			return rollout.Errorf(rollout.EConflict, "a ramp with ID %q already exists", r.ID)
		}
		return err
	})
}

// Ramp returns the ramp id; rollout.ENotFound when there is none.
func (db *DB) Ramp(ctx context.Context, id string) (rollout.Ramp, error) {
	var r rollout.Ramp
	err := db.readTx(ctx, fmt.Sprintf("read ramp %q", id), func(tx *sql.Tx) (err error) {
		r, err = findRamp(ctx, tx, id)
		return err
	})
	return r, err
}

// Ramps returns the ramps of the feature key, every feature's when key is
// "", oldest first.
func (db *DB) Ramps(ctx context.Context, key string) ([]rollout.Ramp, error) {
	rs := []rollout.Ramp{}
	err := db.readTx(ctx, "list ramps", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `
			SELECT body, revision FROM ramps
			WHERE ? = '' OR feature_key = ?
			ORDER BY created_at, id`, key, key)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRamp(rows)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		return rows.Err()
	})
	return rs, err
}

// UpdateRamp replaces the ramp r.ID, which must be at revision
// r.Revision-1, with r. It returns rollout.ENotFound when there is no such
// ramp and rollout.EConflict when it has moved on.
func (db *DB) UpdateRamp(ctx context.Context, r rollout.Ramp) error {
	return db.writeTx(ctx, fmt.Sprintf("update ramp %q", r.ID), func(tx *sql.Tx) error {
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
	return db.writeTx(ctx, fmt.Sprintf("apply ramp %q to feature %q", r.ID, f.Key), func(tx *sql.Tx) error {
		if err := updateRamp(ctx, tx, r); err != nil {
			return err
		}
		return db.writeVersion(ctx, tx, f, v)
	})
}

func findRamp(ctx context.Context, tx *sql.Tx, id string) (rollout.Ramp, error) {
	rows, err := tx.QueryContext(ctx, `SELECT body, revision FROM ramps WHERE id = ?`, id)
	if err != nil {
		return rollout.Ramp{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return rollout.Ramp{}, err
		}
		return rollout.Ramp{}, rollout.Errorf(rollout.ENotFound, "ramp %q does not exist", id)
	}
	return scanRamp(rows)
}

func scanRamp(rows *sql.Rows) (rollout.Ramp, error) {
	var (
		r        rollout.Ramp
		body     string
		revision int
	)
	if err := rows.Scan(&body, &revision); err != nil {
		return rollout.Ramp{}, err
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return rollout.Ramp{}, fmt.Errorf("decode ramp: %w", err)
	}
	r.Revision = revision
	return r, nil
}

func updateRamp(ctx context.Context, tx *sql.Tx, r rollout.Ramp) error {
	body, err := encodeJSON(r)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `
		UPDATE ramps SET state = ?, revision = ?, body = ?
		WHERE id = ? AND revision = ?`,
		string(r.State), r.Revision, body, r.ID, r.Revision-1)
	if constraint(err) == sqlite3.ErrConstraintUnique {
		return rollout.Errorf(rollout.EConflict, "feature %q has another live ramp: cancel it first", r.Feature)
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var stored int
	err = tx.QueryRowContext(ctx, `SELECT revision FROM ramps WHERE id = ?`, r.ID).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return rollout.Errorf(rollout.ENotFound, "ramp %q does not exist", r.ID)
	}
	if err != nil {
		return err
	}
	return rollout.Errorf(rollout.EConflict, "ramp %q is at revision %d, not %d: reload it and try again", r.ID, stored, r.Revision-1)
}
