package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// CreateToken stores t. It returns feature.EConflict when an active token
// has t's name (or t's ID or hash is taken).
func (db *DB) CreateToken(ctx context.Context, t auth.Token) error {
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	return db.writeTx(ctx, fmt.Sprintf("create token %q", t.Name), func(tx *tx) error {
		var env any
		if t.Environment != "" {
			env = t.Environment
		}
		_, err := tx.exec(`INSERT INTO tokens (id, name, role, hash, created_at, created_by, environment) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.Name, string(t.Role), t.Hash, db.d.Time(t.CreatedAt), t.CreatedBy, env)
		switch tx.constraint(err) {
		case Unique:
			return feature.Errorf(feature.EConflict, "a token named %q already exists: revoke it first or choose another name", t.Name)
		case PrimaryKey:
			return feature.Errorf(feature.EConflict, "a token with ID %q already exists", t.ID)
		}
		if err != nil {
			return err
		}
		if err := tx.appendAudit(audit.Event{
			Time: t.CreatedAt, Actor: t.CreatedBy, Kind: audit.TokenCreate, Subject: t.Name,
			Summary: fmt.Sprintf("created %s token %q%s", t.Role, t.Name, scopeText(t.Environment)),
		}); err != nil {
			return err
		}
		return tx.addCommit(rollout.CommitToken, t.Name, db.now())
	})
}

// Tokens returns every token, revoked ones included, oldest first.
func (db *DB) Tokens(ctx context.Context) ([]auth.Token, error) {
	var out []auth.Token
	err := db.readTx(ctx, "list tokens", func(tx *tx) error {
		rows, err := tx.query(`SELECT id, name, role, hash, created_at, revoked_at, created_by, last_used_at, COALESCE(environment, '') FROM tokens ORDER BY created_at, id{C}`)
		out, err = collect(rows, err, func(rows *sql.Rows) (auth.Token, error) {
			var (
				t                auth.Token
				role             string
				created, revoked timestamp
				used             timestamp
			)
			if err := rows.Scan(&t.ID, &t.Name, &role, &t.Hash, &created, &revoked, &t.CreatedBy, &used, &t.Environment); err != nil {
				return auth.Token{}, err
			}
			t.Role, t.CreatedAt = auth.Role(role), created.T
			if revoked.Valid {
				t.RevokedAt = &revoked.T
			}
			if used.Valid {
				t.LastUsedAt = &used.T
			}
			return t, nil
		})
		return err
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// RevokeToken revokes the active token named name, recording the audit
// event of actor's revocation. It returns feature.ENotFound when there is
// none.
func (db *DB) RevokeToken(ctx context.Context, name string, at time.Time, actor string) error {
	return db.writeTx(ctx, fmt.Sprintf("revoke token %q", name), func(tx *tx) error {
		var role string
		err := tx.queryRow(`UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL RETURNING role`, db.d.Time(at), name).Scan(&role)
		if errors.Is(err, sql.ErrNoRows) {
			return feature.Errorf(feature.ENotFound, "no active token is named %q", name)
		}
		if err != nil {
			return err
		}
		if err := tx.appendAudit(audit.Event{
			Time: at, Actor: actor, Kind: audit.TokenRevoke, Subject: name,
			Summary: fmt.Sprintf("revoked %s token %q", role, name),
		}); err != nil {
			return err
		}
		return tx.addCommit(rollout.CommitToken, name, db.now())
	})
}

// EndSession records that the dashboard session id signed out, until it
// expires, and forgets sessions that have expired. A session ended already
// writes no commit.
func (db *DB) EndSession(ctx context.Context, id string, expires time.Time) error {
	return db.writeTx(ctx, "end session", func(tx *tx) error {
		now := db.now()
		if _, err := tx.exec(`DELETE FROM ended_sessions WHERE expires_at < ?`, db.d.Time(now)); err != nil {
			return err
		}
		n, err := tx.affected(`INSERT INTO ended_sessions (id, expires_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, id, db.d.Time(expires))
		if err != nil || n == 0 {
			return err
		}
		return tx.addCommit(rollout.CommitToken, auth.SessionCommitKey, now)
	})
}

// SweepEndedSessions deletes the ended sessions that expired before now and
// returns how many.
func (db *DB) SweepEndedSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.writeTx(ctx, "sweep ended sessions", func(tx *tx) (err error) {
		n, err = tx.affected(`DELETE FROM ended_sessions WHERE expires_at < ?`, db.d.Time(now))
		return err
	})
	return int(n), err
}

// EndedSessions returns the sessions that signed out and expire after now.
func (db *DB) EndedSessions(ctx context.Context, now time.Time) ([]string, error) {
	var out []string
	err := db.readTx(ctx, "list ended sessions", func(tx *tx) error {
		rows, err := tx.query(`SELECT id FROM ended_sessions WHERE expires_at >= ? ORDER BY id{C}`, db.d.Time(now))
		out, err = collect(rows, err, func(rows *sql.Rows) (id string, err error) {
			return id, rows.Scan(&id)
		})
		return err
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// TouchTokens records when the tokens of used (by ID) were last used: each
// stored last_used_at becomes the later of itself and the given time.
// Unknown IDs are ignored. It writes no commit and no audit event.
func (db *DB) TouchTokens(ctx context.Context, used map[string]time.Time) error {
	return db.writeTx(ctx, "record token use", func(tx *tx) error {
		for id, at := range used {
			if _, err := tx.exec(`UPDATE tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`,
				db.d.Time(at), id, db.d.Time(at)); err != nil {
				return err
			}
		}
		return nil
	})
}

// scopeText says which environment a token is scoped to, for its audit
// event: "" for every environment.
func scopeText(env string) string {
	if env == "" {
		return ""
	}
	return " for environment " + env
}
