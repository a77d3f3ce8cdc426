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

// addCommit takes the next revision, records the change of kind to key at
// time at as its commit (announced on commit where the dialect's Commit
// statement does so). The UPDATE holds the one revision row until the transaction
// ends (SQLite: the write lock, held from BEGIN IMMEDIATE, already does),
// so writers take revisions one after the other, each after the previous
// one has committed or rolled back: no reader sees revision n+1 committed
// while n is not. It should be the transaction's last write.
func (tx *tx) addCommit(kind rollout.CommitKind, key string, at time.Time) error {
	var rev int64
	env := ""
	if kind == rollout.CommitFeature {
		env = tx.env()
	}
	if tx.db.d.Commit != "" {
		if err := tx.queryRow(tx.db.d.Commit, string(kind), key, tx.db.d.Time(at), env).Scan(&rev); err != nil {
			return fmt.Errorf("record commit: %w", err)
		}
		return nil
	}
	if err := tx.queryRow(`UPDATE revision SET revision = revision + 1 WHERE id = 1 RETURNING revision`).Scan(&rev); err != nil {
		return fmt.Errorf("take next revision: %w", err)
	}
	if _, err := tx.exec(`INSERT INTO commits (revision, kind, key, created_at, environment) VALUES (?, ?, ?, ?, ?)`,
		rev, string(kind), key, tx.db.d.Time(at), env); err != nil {
		return fmt.Errorf("record commit %d: %w", rev, err)
	}
	return nil
}

// Revision returns the revision of the last commit, 0 when there is none.
func (db *DB) Revision(ctx context.Context) (int64, error) {
	var rev int64
	err := db.read(ctx, "read revision", func(tx *tx) error {
		return tx.queryRow(`SELECT revision FROM revision WHERE id = 1`).Scan(&rev)
	})
	return rev, err
}

// Commits returns the commits with a revision above since, oldest first, at
// most limit of them (all when limit <= 0): those of the DB's environment
// and those of every environment (tokens, segments, environments).
func (db *DB) Commits(ctx context.Context, since int64, limit int) ([]rollout.Commit, error) {
	q, args := `SELECT revision, kind, key, created_at FROM commits WHERE revision > ? AND environment IN (?, '') ORDER BY revision`, []any{since, db.env}
	if limit > 0 {
		q, args = q+` LIMIT ?`, append(args, limit)
	}
	var out []rollout.Commit
	err := db.read(ctx, fmt.Sprintf("list commits since revision %d", since), func(tx *tx) error {
		rows, err := tx.query(q, args...)
		out, err = collect(rows, err, func(rows *sql.Rows) (rollout.Commit, error) {
			var (
				c    rollout.Commit
				kind string
				at   timestamp
			)
			err := rows.Scan(&c.Revision, &kind, &c.Key, &at)
			c.Kind, c.Time = rollout.CommitKind(kind), at.T
			return c, err
		})
		return err
	})
	return out, err
}

// SessionKey returns the 32-byte session key kept in the database, making
// it on the first call. Processes calling it at once for the first time all
// get the key the first of them stored: the insert of the others waits for
// that one to commit, does nothing, and they read its key.
func (db *DB) SessionKey(ctx context.Context) ([]byte, error) {
	const op = "read session key"
	var key []byte
	err := db.read(ctx, op, func(tx *tx) error {
		return tx.queryRow(`SELECT value FROM settings WHERE name = 'session_key'`).Scan(&key)
	})
	if errors.Is(err, sql.ErrNoRows) {
		fresh := make([]byte, sessionKeySize)
		rand.Read(fresh)
		err = db.writeTx(ctx, op, func(tx *tx) error {
			if _, err := tx.exec(`
				INSERT INTO settings (name, value) VALUES ('session_key', ?)
				ON CONFLICT (name) DO NOTHING`, fresh); err != nil {
				return err
			}
			return tx.queryRow(`SELECT value FROM settings WHERE name = 'session_key'`).Scan(&key)
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
