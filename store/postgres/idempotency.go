package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// ClaimIdempotency claims r.Key of r.Scope for r.Attempt; see
// rollout.IdempotencyStore. Of instances claiming a new key at once, one
// inserts it and the others find it. A key that another transaction is
// finishing (a change committing its answer) is locked by that
// transaction: the claim waits for it, then sees the key done. The
// methods of idempotency keys ignore the claim their context may carry.
func (db *DB) ClaimIdempotency(ctx context.Context, r rollout.IdempotencyRecord, now time.Time) (rollout.IdempotencyRecord, bool, error) {
	var got rollout.IdempotencyRecord
	var claimed bool
	err := db.plainWriteTx(ctx, fmt.Sprintf("claim Idempotency-Key %q", r.Key), func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO idempotency_keys (scope, key, fingerprint, attempt, done, answer, lease_until, expires_at)
			VALUES ($1, $2, $3, $4, false, NULL, $5, $6)
			ON CONFLICT (scope, key) DO NOTHING`,
			r.Scope, r.Key, r.Fingerprint, r.Attempt, r.LeaseUntil, r.Expires)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			got, claimed = r, true
			return nil
		}
		got = rollout.IdempotencyRecord{Scope: r.Scope, Key: r.Key}
		err = tx.QueryRow(ctx, `
			SELECT fingerprint, attempt, done, answer, lease_until, expires_at
			FROM idempotency_keys WHERE scope = $1 AND key = $2 FOR UPDATE`, r.Scope, r.Key).
			Scan(&got.Fingerprint, &got.Attempt, &got.Done, &got.Answer, &got.LeaseUntil, &got.Expires)
		if errors.Is(err, pgx.ErrNoRows) {
			// Released or expired between the insert and the select.
			return rollout.Errorf(rollout.EKeyInUse, "a request with Idempotency-Key %q has just ended: send it again", r.Key)
		}
		if err != nil {
			return err
		}
		got.LeaseUntil, got.Expires = got.LeaseUntil.UTC(), got.Expires.UTC()
		switch {
		case !got.Expires.After(now):
			_, err = tx.Exec(ctx, `
				UPDATE idempotency_keys SET fingerprint = $3, attempt = $4, done = false, answer = NULL, lease_until = $5, expires_at = $6
				WHERE scope = $1 AND key = $2`,
				r.Scope, r.Key, r.Fingerprint, r.Attempt, r.LeaseUntil, r.Expires)
			got, claimed = r, err == nil
			return err
		case got.Fingerprint != r.Fingerprint || got.Done || got.LeaseUntil.After(now):
			return nil
		}
		// Pending, and its lease is over: take it over.
		_, err = tx.Exec(ctx, `
			UPDATE idempotency_keys SET attempt = $3, lease_until = $4
			WHERE scope = $1 AND key = $2`,
			r.Scope, r.Key, r.Attempt, r.LeaseUntil)
		got.Attempt, got.LeaseUntil, claimed = r.Attempt, r.LeaseUntil, err == nil
		return err
	})
	return got, claimed, err
}

// finishIdempotency marks the pending key of r held by r.Attempt done with
// r.Answer, or returns rollout.EKeyInUse when it is not so held. The row
// stays locked until the transaction ends.
func finishIdempotency(ctx context.Context, tx pgx.Tx, r rollout.IdempotencyRecord) error {
	tag, err := tx.Exec(ctx, `
		UPDATE idempotency_keys SET done = true, answer = $4, expires_at = $5
		WHERE scope = $1 AND key = $2 AND attempt = $3 AND NOT done`,
		r.Scope, r.Key, r.Attempt, r.Answer, r.Expires)
	if err != nil {
		return fmt.Errorf("finish Idempotency-Key %q: %w", r.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return rollout.Errorf(rollout.EKeyInUse, "the request with Idempotency-Key %q no longer holds the key (a retry took it over, or it expired): nothing was changed; send the request again to get its answer", r.Key)
	}
	return nil
}

// CompleteIdempotency marks r's pending key done with its answer; see
// rollout.IdempotencyStore.
func (db *DB) CompleteIdempotency(ctx context.Context, r rollout.IdempotencyRecord) error {
	return db.plainWriteTx(ctx, fmt.Sprintf("complete Idempotency-Key %q", r.Key), func(tx pgx.Tx) error {
		return finishIdempotency(ctx, tx, r)
	})
}

// ReleaseIdempotency deletes the key if attempt still holds it, pending.
func (db *DB) ReleaseIdempotency(ctx context.Context, scope, key, attempt string) error {
	return db.plainWriteTx(ctx, fmt.Sprintf("release Idempotency-Key %q", key), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND attempt = $3 AND NOT done`, scope, key, attempt)
		return err
	})
}

// ExpireIdempotency deletes the keys that expired at now.
func (db *DB) ExpireIdempotency(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := db.plainWriteTx(ctx, "expire idempotency keys", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at <= $1`, now)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}
