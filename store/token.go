package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/mattn/go-sqlite3"

	"github.com/rollout/rollout/rollout"
)

var _ rollout.TokenStore = (*DB)(nil)

// CreateToken stores t. It returns rollout.EConflict when an active token
// has t's name.
func (db *DB) CreateToken(ctx context.Context, t rollout.Token) error {
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	return db.writeTx(ctx, fmt.Sprintf("create token %q", t.Name), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO tokens (id, name, role, hash, created_at) VALUES (?, ?, ?, ?, ?)`,
			t.ID, t.Name, string(t.Role), t.Hash, formatTime(t.CreatedAt))
		switch constraint(err) {
		case sqlite3.ErrConstraintUnique:
			return rollout.Errorf(rollout.EConflict, "a token named %q already exists: revoke it first or choose another name", t.Name)
		case sqlite3.ErrConstraintPrimaryKey:
			return rollout.Errorf(rollout.EConflict, "a token with ID %q already exists", t.ID)
		}
		if err != nil {
			return err
		}
		return addCommit(ctx, tx, rollout.CommitToken, t.Name, db.now())
	})
}

// Tokens returns every token, revoked ones included, oldest first.
func (db *DB) Tokens(ctx context.Context) ([]rollout.Token, error) {
	var out []rollout.Token
	err := db.readTx(ctx, "list tokens", func(tx *sql.Tx) (err error) {
		out, err = listTokens(ctx, tx)
		return err
	})
	return out, err
}

// RevokeToken revokes the active token named name. It returns
// rollout.ENotFound when there is none.
func (db *DB) RevokeToken(ctx context.Context, name string, at time.Time) error {
	return db.writeTx(ctx, fmt.Sprintf("revoke token %q", name), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL`, formatTime(at), name)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return rollout.Errorf(rollout.ENotFound, "no active token is named %q", name)
		}
		return addCommit(ctx, tx, rollout.CommitToken, name, db.now())
	})
}

func listTokens(ctx context.Context, tx *sql.Tx) ([]rollout.Token, error) {
	rows, err := tx.QueryContext(ctx,
		`SELECT id, name, role, hash, created_at, revoked_at FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rollout.Token
	for rows.Next() {
		var (
			t       rollout.Token
			created string
			revoked sql.NullString
		)
		if err := rows.Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &created, &revoked); err != nil {
			return nil, err
		}
		if t.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("decode token %q: %w", t.Name, err)
		}
		if revoked.Valid {
			at, err := parseTime(revoked.String)
			if err != nil {
				return nil, fmt.Errorf("decode token %q: %w", t.Name, err)
			}
			t.RevokedAt = &at
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// EndSession records that the dashboard session id signed out, until it
// expires, and forgets sessions that have expired. A session ended already
// writes no commit.
func (db *DB) EndSession(ctx context.Context, id string, expires time.Time) error {
	return db.writeTx(ctx, "end session", func(tx *sql.Tx) error {
		now := db.now()
		if _, err := tx.ExecContext(ctx, `DELETE FROM ended_sessions WHERE expires_at < ?`, formatTime(now)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO ended_sessions (id, expires_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, id, formatTime(expires))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return addCommit(ctx, tx, rollout.CommitToken, rollout.SessionCommitKey, now)
	})
}

// SweepEndedSessions deletes the ended sessions that expired before now and
// returns how many.
func (db *DB) SweepEndedSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.writeTx(ctx, "sweep ended sessions", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ended_sessions WHERE expires_at < ?`, formatTime(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// EndedSessions returns the sessions that signed out and expire after now.
func (db *DB) EndedSessions(ctx context.Context, now time.Time) ([]string, error) {
	var out []string
	err := db.readTx(ctx, "list ended sessions", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM ended_sessions WHERE expires_at >= ? ORDER BY id`, formatTime(now))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out = append(out, id)
		}
		return rows.Err()
	})
	return out, err
}
