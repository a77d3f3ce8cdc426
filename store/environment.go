package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
)

var _ rollout.EnvironmentStore = (*DB)(nil)

// Environments returns the environments that exist (not deleted), ordered
// by position, then key.
func (db *DB) Environments(ctx context.Context) ([]rollout.Environment, error) {
	var out []rollout.Environment
	err := db.readTx(ctx, "list environments", func(tx *tx) (err error) {
		out, err = tx.environments()
		return err
	})
	return out, err
}

func (tx *tx) environments() ([]rollout.Environment, error) {
	rows, err := tx.query(`SELECT key, name, protected, require_comment, position, created_at FROM environments WHERE deleted_at IS NULL ORDER BY position, key{C}`)
	return collect(rows, err, func(rows *sql.Rows) (rollout.Environment, error) {
		var (
			e  rollout.Environment
			at timestamp
		)
		err := rows.Scan(&e.Key, &e.Name, &e.Protected, &e.RequireComment, &e.Position, &at)
		e.CreatedAt = at.T
		return e, err
	})
}

// CreateEnvironment stores e, places each of features in it at its first
// version, records ev and a commit, in one transaction. It returns
// feature.EConflict when the key is taken (by an environment that exists
// or was deleted: a deleted one keeps its history under its key) or when
// there are environment.Max already.
func (db *DB) CreateEnvironment(ctx context.Context, e rollout.Environment, features []rollout.Placed, ev audit.Event) error {
	return db.longWriteTx(ctx, fmt.Sprintf("create environment %q", e.Key), extraFor(len(features)), func(tx *tx) error {
		var n int
		if err := tx.queryRow(`SELECT COUNT(*) FROM environments WHERE deleted_at IS NULL`).Scan(&n); err != nil {
			return err
		}
		if n >= environment.Max {
			return feature.Errorf(feature.EConflict, "there are %d environments, the most a database may have: delete one first", n)
		}
		var deleted bool
		switch err := tx.queryRow(`SELECT deleted_at IS NOT NULL FROM environments WHERE key = ?`, e.Key).Scan(&deleted); {
		case err == nil && deleted:
			return feature.Errorf(feature.EConflict, "environment %q was deleted, and its key stays with its history: choose another key", e.Key)
		case err == nil:
			return feature.Errorf(feature.EConflict, "environment %q exists already", e.Key)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.exec(`INSERT INTO environments (key, name, protected, require_comment, position, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			e.Key, e.Name, e.Protected, e.RequireComment, e.Position, db.d.Time(e.CreatedAt)); err != nil {
			return err
		}
		in := tx.in(e.Key)
		for _, p := range features {
			if err := in.placeFeature(p.Feature, p.Version); err != nil {
				return err
			}
		}
		if err := tx.appendAudit(ev); err != nil {
			return err
		}
		return tx.addCommit(rollout.CommitEnvironment, e.Key, db.now())
	})
}

// extraFor is the time beyond the store's timeout that a write of n
// features may take.
func extraFor(n int) time.Duration { return time.Duration(n) * 5 * time.Millisecond }

// UpdateEnvironment replaces the name, protection and position of the
// environment e.Key, and records ev and a commit. feature.ENotFound when
// there is none.
func (db *DB) UpdateEnvironment(ctx context.Context, e rollout.Environment, ev audit.Event) error {
	return db.writeTx(ctx, fmt.Sprintf("update environment %q", e.Key), func(tx *tx) error {
		n, err := tx.affected(`UPDATE environments SET name = ?, protected = ?, require_comment = ?, position = ? WHERE key = ? AND deleted_at IS NULL`,
			e.Name, e.Protected, e.RequireComment, e.Position, e.Key)
		if err != nil {
			return err
		}
		if n == 0 {
			return environment.Unknown(e.Key)
		}
		if err := tx.appendAudit(ev); err != nil {
			return err
		}
		return tx.addCommit(rollout.CommitEnvironment, e.Key, db.now())
	})
}

// DeleteEnvironment marks the environment key deleted: it is listed no
// more, and its features, history, ramps, requests and audit events stay
// (nothing serves or runs them any more). It refuses,
// with feature.EConflict, while an active token is scoped to it or when it
// is the last environment.
func (db *DB) DeleteEnvironment(ctx context.Context, key string, ev audit.Event) error {
	return db.writeTx(ctx, fmt.Sprintf("delete environment %q", key), func(tx *tx) error {
		envs, err := tx.environments()
		if err != nil {
			return err
		}
		found := false
		for _, e := range envs {
			found = found || e.Key == key
		}
		switch {
		case !found:
			return environment.Unknown(key)
		case len(envs) == 1:
			return feature.Errorf(feature.EConflict, "environment %q is the last one: a database keeps at least one", key)
		}
		var names []string
		rows, err := tx.query(`SELECT name FROM tokens WHERE environment = ? AND revoked_at IS NULL ORDER BY name{C}`, key)
		names, err = collect(rows, err, func(rows *sql.Rows) (string, error) {
			var n string
			return n, rows.Scan(&n)
		})
		if err != nil {
			return err
		}
		if len(names) > 0 {
			return feature.Errorf(feature.EConflict, "environment %q has active tokens scoped to it (%s): revoke them first", key, joinNames(names))
		}
		if _, err := tx.exec(`UPDATE environments SET deleted_at = ? WHERE key = ?`, db.d.Time(db.now()), key); err != nil {
			return err
		}
		if err := tx.appendAudit(ev); err != nil {
			return err
		}
		return tx.addCommit(rollout.CommitEnvironment, key, db.now())
	})
}

// joinNames lists up to 10 names, then how many more.
func joinNames(names []string) string {
	if len(names) > 10 {
		return fmt.Sprintf("%s and %d more", joinNames(names[:10]), len(names)-10)
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%q", n)
	}
	return out
}
