package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// CreateToken stores t. It returns rollout.EConflict when an active token
// has t's name (or t's ID or hash is taken).
func (db *DB) CreateToken(ctx context.Context, t rollout.Token) error {
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	return db.writeTx(ctx, fmt.Sprintf("create token %q", t.Name), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx,
			`INSERT INTO tokens (id, name, role, hash, created_at) VALUES ($1, $2, $3, $4, $5)`,
			t.ID, t.Name, string(t.Role), t.Hash, t.CreatedAt.UTC())
		if code, constraint := sqlState(err); code == uniqueViolation {
			if constraint == "tokens_pkey" {
				return rollout.Errorf(rollout.EConflict, "a token with ID %q already exists", t.ID)
			}
			return rollout.Errorf(rollout.EConflict, "a token named %q already exists: revoke it first or choose another name", t.Name)
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
	err := db.readTx(ctx, "list tokens", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx,
			`SELECT id, name, role, hash, created_at, revoked_at FROM tokens ORDER BY created_at, id COLLATE "C"`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (rollout.Token, error) {
			var (
				t       rollout.Token
				role    string
				revoked *time.Time
			)
			if err := row.Scan(&t.ID, &t.Name, &role, &t.Hash, &t.CreatedAt, &revoked); err != nil {
				return rollout.Token{}, err
			}
			t.Role = rollout.Role(role)
			t.CreatedAt = t.CreatedAt.UTC()
			if revoked != nil {
				at := revoked.UTC()
				t.RevokedAt = &at
			}
			return t, nil
		})
		return err
	})
	return out, err
}

// RevokeToken revokes the active token named name. It returns
// rollout.ENotFound when there is none.
func (db *DB) RevokeToken(ctx context.Context, name string, at time.Time) error {
	return db.writeTx(ctx, fmt.Sprintf("revoke token %q", name), func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx,
			`UPDATE tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL`, at.UTC(), name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return rollout.Errorf(rollout.ENotFound, "no active token is named %q", name)
		}
		return addCommit(ctx, tx, rollout.CommitToken, name, db.now())
	})
}

// EndSession records that the dashboard session id signed out, until it
// expires, and forgets sessions that have expired. A session ended already
// writes no commit.
func (db *DB) EndSession(ctx context.Context, id string, expires time.Time) error {
	return db.writeTx(ctx, "end session", func(tx pgx.Tx) error {
		now := db.now()
		if _, err := tx.Exec(ctx, `DELETE FROM ended_sessions WHERE expires_at < $1`, now.UTC()); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx,
			`INSERT INTO ended_sessions (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, expires.UTC())
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return addCommit(ctx, tx, rollout.CommitToken, rollout.SessionCommitKey, now)
	})
}

// SweepEndedSessions deletes the ended sessions that expired before now and
// returns how many.
func (db *DB) SweepEndedSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.writeTx(ctx, "sweep ended sessions", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM ended_sessions WHERE expires_at < $1`, now.UTC())
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// EndedSessions returns the sessions that signed out and expire after now.
func (db *DB) EndedSessions(ctx context.Context, now time.Time) ([]string, error) {
	var out []string
	err := db.readTx(ctx, "list ended sessions", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM ended_sessions WHERE expires_at >= $1 ORDER BY id COLLATE "C"`, now.UTC())
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return out, err
}
