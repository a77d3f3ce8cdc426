package store

import (
	"context"
	"database/sql"
	"errors"
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
	if err := db.checkFile(); err != nil {
		return err
	}
	_, err := db.write.ExecContext(ctx,
		`INSERT INTO tokens (id, name, role, hash, created_at) VALUES (?, ?, ?, ?, ?)`,
		t.ID, t.Name, string(t.Role), t.Hash, formatTime(t.CreatedAt))
	var se sqlite3.Error
	if errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique {
		return rollout.Errorf(rollout.EConflict, "a token named %q already exists: revoke it first or choose another name", t.Name)
	}
	if err != nil {
		return wrapErr(err, "create token %q", t.Name)
	}
	return nil
}

// Tokens returns every token, revoked ones included, oldest first.
func (db *DB) Tokens(ctx context.Context) ([]rollout.Token, error) {
	rows, err := db.read.QueryContext(ctx,
		`SELECT id, name, role, hash, created_at, revoked_at FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, wrapErr(err, "list tokens")
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
			return nil, wrapErr(err, "list tokens")
		}
		if t.CreatedAt, err = parseTime(created); err != nil {
			return nil, wrapErr(err, "list tokens")
		}
		if revoked.Valid {
			at, err := parseTime(revoked.String)
			if err != nil {
				return nil, wrapErr(err, "list tokens")
			}
			t.RevokedAt = &at
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(err, "list tokens")
	}
	return out, nil
}

// RevokeToken revokes the active token named name.
func (db *DB) RevokeToken(ctx context.Context, name string, at time.Time) error {
	if err := db.checkFile(); err != nil {
		return err
	}
	res, err := db.write.ExecContext(ctx,
		`UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL`, formatTime(at), name)
	if err != nil {
		return wrapErr(err, "revoke token %q", name)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return rollout.Errorf(rollout.ENotFound, "no active token is named %q", name)
	}
	return nil
}
