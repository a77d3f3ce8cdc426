package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// CreateSession stores a person's session and records its audit event.
func (db *DB) CreateSession(ctx context.Context, s auth.Session) error {
	return db.writeTx(ctx, "create session", func(tx *tx) error {
		var env any
		if s.Environment != "" {
			env = s.Environment
		}
		_, err := tx.exec(`INSERT INTO people_sessions (id, person, subject, role, environment, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			s.ID, s.Person, s.Subject, string(s.Role), env, db.d.Time(s.CreatedAt), db.d.Time(s.ExpiresAt))
		if tx.constraint(err) == PrimaryKey {
			return feature.Errorf(feature.EConflict, "a session with that ID already exists")
		}
		if err != nil {
			return err
		}
		if err := tx.appendAudit(audit.Event{
			Time: s.CreatedAt, Actor: s.Actor(), Kind: audit.SessionCreate, Subject: s.Person,
			Summary: fmt.Sprintf("signed in with single sign-on as %s%s", s.Role, map[bool]string{true: " in environment " + s.Environment}[s.Environment != ""]),
		}); err != nil {
			return err
		}
		return tx.addCommit(rollout.CommitToken, auth.SessionCommitKey, db.now())
	})
}

// Sessions returns the people's sessions that are not revoked and expire
// after now, oldest first.
func (db *DB) Sessions(ctx context.Context, now time.Time) ([]auth.Session, error) {
	var out []auth.Session
	err := db.readTx(ctx, "list sessions", func(tx *tx) error {
		rows, err := tx.query(`SELECT id, person, subject, role, COALESCE(environment, ''), created_at, expires_at FROM people_sessions
			WHERE revoked_at IS NULL AND expires_at > ? ORDER BY created_at, id{C}`, db.d.Time(now))
		out, err = collect(rows, err, func(rows *sql.Rows) (auth.Session, error) {
			var (
				s                auth.Session
				role             string
				created, expires timestamp
			)
			if err := rows.Scan(&s.ID, &s.Person, &s.Subject, &role, &s.Environment, &created, &expires); err != nil {
				return auth.Session{}, err
			}
			s.Role, s.CreatedAt, s.ExpiresAt = auth.Role(role), created.T, expires.T
			return s, nil
		})
		return err
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// RevokeSession revokes the live session id (not revoked, not expired at
// at), recording actor's audit event; feature.ENotFound when there is none.
func (db *DB) RevokeSession(ctx context.Context, id string, at time.Time, actor string) error {
	return db.writeTx(ctx, "revoke session", func(tx *tx) error {
		var person, role string
		err := tx.queryRow(`UPDATE people_sessions SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL AND expires_at > ?
			RETURNING person, role`, db.d.Time(at), actor, id, db.d.Time(at)).Scan(&person, &role)
		if errors.Is(err, sql.ErrNoRows) {
			return feature.Errorf(feature.ENotFound, "no live session has ID %q", id)
		}
		if err != nil {
			return err
		}
		summary := fmt.Sprintf("revoked the %s session of %s", role, person)
		if actor == person+auth.SSOSuffix {
			summary = "signed out"
		}
		if err := tx.appendAudit(audit.Event{Time: at, Actor: actor, Kind: audit.SessionRevoke, Subject: person, Summary: summary}); err != nil {
			return err
		}
		return tx.addCommit(rollout.CommitToken, auth.SessionCommitKey, db.now())
	})
}
