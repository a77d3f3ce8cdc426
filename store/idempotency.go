package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rollout/rollout/rollout"
)

// ClaimIdempotency claims r.Key of r.Scope for r.Attempt; see
// rollout.IdempotencyStore. The methods of idempotency keys ignore the
// claim their context may carry. Writes in SQLite take turns, so a key that a
// change is finishing is never seen half-way.
func (db *DB) ClaimIdempotency(ctx context.Context, r rollout.IdempotencyRecord, now time.Time) (rollout.IdempotencyRecord, bool, error) {
	var got rollout.IdempotencyRecord
	var claimed bool
	err := db.plainWriteTx(ctx, fmt.Sprintf("claim Idempotency-Key %q", r.Key), func(tx *sql.Tx) error {
		var err error
		got, err = findIdempotency(ctx, tx, r.Scope, r.Key)
		switch {
		case errors.Is(err, sql.ErrNoRows), err == nil && !got.Expires.After(now):
			_, err = tx.ExecContext(ctx, `
				INSERT OR REPLACE INTO idempotency_keys (scope, key, fingerprint, attempt, done, answer, lease_until, expires_at)
				VALUES (?, ?, ?, ?, 0, NULL, ?, ?)`,
				r.Scope, r.Key, r.Fingerprint, r.Attempt, r.LeaseUntil.UnixNano(), r.Expires.UnixNano())
			got, claimed = r, err == nil
			return err
		case err != nil:
			return err
		case got.Fingerprint != r.Fingerprint || got.Done || got.LeaseUntil.After(now):
			return nil
		}
		// Pending, and its lease is over: take it over.
		_, err = tx.ExecContext(ctx, `
			UPDATE idempotency_keys SET attempt = ?, lease_until = ?
			WHERE scope = ? AND key = ? AND NOT done`,
			r.Attempt, r.LeaseUntil.UnixNano(), r.Scope, r.Key)
		got.Attempt, got.LeaseUntil, claimed = r.Attempt, r.LeaseUntil, err == nil
		return err
	})
	return got, claimed, err
}

func findIdempotency(ctx context.Context, tx *sql.Tx, scope, key string) (rollout.IdempotencyRecord, error) {
	r := rollout.IdempotencyRecord{Scope: scope, Key: key}
	var lease, expires int64
	err := tx.QueryRowContext(ctx, `
		SELECT fingerprint, attempt, done, answer, lease_until, expires_at
		FROM idempotency_keys WHERE scope = ? AND key = ?`, scope, key).
		Scan(&r.Fingerprint, &r.Attempt, &r.Done, &r.Answer, &lease, &expires)
	r.LeaseUntil, r.Expires = time.Unix(0, lease).UTC(), time.Unix(0, expires).UTC()
	return r, err
}

// finishIdempotency marks the pending key of r held by r.Attempt done with
// r.Answer, or returns rollout.EKeyInUse when it is not so held.
func finishIdempotency(ctx context.Context, tx *sql.Tx, r rollout.IdempotencyRecord) error {
	res, err := tx.ExecContext(ctx, `
		UPDATE idempotency_keys SET done = 1, answer = ?, expires_at = ?
		WHERE scope = ? AND key = ? AND attempt = ? AND NOT done`,
		r.Answer, r.Expires.UnixNano(), r.Scope, r.Key, r.Attempt)
	if err != nil {
		return fmt.Errorf("finish Idempotency-Key %q: %w", r.Key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return idempotencyLost(r.Key)
	}
	return nil
}

func idempotencyLost(key string) error {
	return rollout.Errorf(rollout.EKeyInUse, "the request with Idempotency-Key %q no longer holds the key (a retry took it over, or it expired): nothing was changed; send the request again to get its answer", key)
}

// CompleteIdempotency marks r's pending key done with its answer; see
// rollout.IdempotencyStore.
func (db *DB) CompleteIdempotency(ctx context.Context, r rollout.IdempotencyRecord) error {
	return db.plainWriteTx(ctx, fmt.Sprintf("complete Idempotency-Key %q", r.Key), func(tx *sql.Tx) error {
		return finishIdempotency(ctx, tx, r)
	})
}

// ReleaseIdempotency deletes the key if attempt still holds it, pending.
func (db *DB) ReleaseIdempotency(ctx context.Context, scope, key, attempt string) error {
	return db.plainWriteTx(ctx, fmt.Sprintf("release Idempotency-Key %q", key), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND attempt = ? AND NOT done`, scope, key, attempt)
		return err
	})
}

// ExpireIdempotency deletes the keys that expired at now.
func (db *DB) ExpireIdempotency(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := db.plainWriteTx(ctx, "expire idempotency keys", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= ?`, now.UnixNano())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
