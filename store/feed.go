package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rollout/rollout/rollout"
)

// sessionKeySize is the length of the session key in bytes.
const sessionKeySize = 32

// addCommit takes the next revision and records the change of kind to key
// at time at as its commit. SQLite's write lock, which every write
// transaction holds from its start (BEGIN IMMEDIATE) to its commit,
// serializes the writers of every process, so revisions follow commit order.
func addCommit(ctx context.Context, tx *sql.Tx, kind rollout.CommitKind, key string, at time.Time) error {
	var rev int64
	if err := tx.QueryRowContext(ctx, `UPDATE revision SET revision = revision + 1 WHERE id = 1 RETURNING revision`).Scan(&rev); err != nil {
		return fmt.Errorf("take next revision: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO commits (revision, kind, key, created_at) VALUES (?, ?, ?, ?)`,
		rev, string(kind), key, formatTime(at)); err != nil {
		return fmt.Errorf("record commit %d: %w", rev, err)
	}
	return nil
}

// Revision returns the revision of the last commit, 0 when there is none.
func (db *DB) Revision(ctx context.Context) (int64, error) {
	var rev int64
	err := db.readTx(ctx, "read revision", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT revision FROM revision WHERE id = 1`).Scan(&rev)
	})
	return rev, err
}

// Commits returns the commits with a revision above since, oldest first, at
// most limit of them (all when limit <= 0).
func (db *DB) Commits(ctx context.Context, since int64, limit int) ([]rollout.Commit, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var out []rollout.Commit
	err := db.readTx(ctx, fmt.Sprintf("list commits since revision %d", since), func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `
			SELECT revision, kind, key, created_at FROM commits
			WHERE revision > ? ORDER BY revision LIMIT ?`, since, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []rollout.Commit{}
		for rows.Next() {
			var (
				c  rollout.Commit
				at string
			)
			if err := rows.Scan(&c.Revision, &c.Kind, &c.Key, &at); err != nil {
				return err
			}
			if c.Time, err = parseTime(at); err != nil {
				return fmt.Errorf("decode commit %d: %w", c.Revision, err)
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// SessionKey returns the 32-byte session key kept in the database, making
// it on the first call. Processes calling it at once for the first time
// all get the key the first of them stored.
func (db *DB) SessionKey(ctx context.Context) ([]byte, error) {
	const op = "read session key"
	var key []byte
	err := db.readTx(ctx, op, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'session_key'`).Scan(&key)
	})
	if errors.Is(err, sql.ErrNoRows) {
		fresh := make([]byte, sessionKeySize)
		rand.Read(fresh)
		err = db.writeTx(ctx, op, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO settings (name, value) VALUES ('session_key', ?)
				ON CONFLICT (name) DO NOTHING`, fresh); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'session_key'`).Scan(&key)
		})
	}
	if err != nil {
		return nil, err
	}
	if len(key) != sessionKeySize {
		return nil, fmt.Errorf("%s: stored key has %d bytes, want %d", op, len(key), sessionKeySize)
	}
	return key, nil
}

// CheckWrite writes the one row of the write_probe table in a transaction
// of its own connection, which waits at most half a second for a lock, so
// that it answers within about a second. It returns rollout.EUnavailable
// when the write fails: another process holds the write lock, the disk is
// full, the file is read-only or gone.
func (db *DB) CheckWrite(ctx context.Context) error {
	const op = "check writes"
	if err := db.checkFile(); err != nil {
		return err
	}
	probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := inTx(probeCtx, db.probe, op, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(probeCtx, `UPDATE write_probe SET checked_at = ? WHERE id = 1`, formatTime(db.now()))
		return err
	})
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", op, rollout.Errorf(rollout.EUnavailable, "the database did not take a write within %v", probeTimeout), err)
	}
	return err
}
