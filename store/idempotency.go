package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
)

// ClaimIdempotency claims r.Key of r.Scope for r.Attempt; see
// rollout.IdempotencyStore. Of handles claiming a new key at once, one
// inserts it and the others find it. A key that another transaction is
// finishing (a change committing its answer) is held by that transaction
// (SQLite's write lock, PostgreSQL's row lock): the claim waits for it,
// then sees the key done.
func (db *DB) ClaimIdempotency(ctx context.Context, r idempotency.Record, now time.Time) (idempotency.Record, bool, error) {
	var got idempotency.Record
	var claimed bool
	err := db.writeTx(ctx, fmt.Sprintf("claim Idempotency-Key %q", r.Key), func(tx *tx) error {
		n, err := tx.affected(`
			INSERT INTO idempotency_keys (scope, key, fingerprint, attempt, done, answer, lease_until, expires_at)
			VALUES (?, ?, ?, ?, false, NULL, ?, ?)
			ON CONFLICT (scope, key) DO NOTHING`,
			r.Scope, r.Key, r.Fingerprint, r.Attempt, db.d.Nanos(r.LeaseUntil), db.d.Nanos(r.Expires))
		if err != nil {
			return err
		}
		if n == 1 {
			got, claimed = r, true
			return nil
		}
		got = idempotency.Record{Scope: r.Scope, Key: r.Key}
		var lease, expires timestamp
		err = tx.queryRow(`
			SELECT fingerprint, attempt, done, answer, lease_until, expires_at
			FROM idempotency_keys WHERE scope = ? AND key = ? {forUpdate}`, r.Scope, r.Key).
			Scan(&got.Fingerprint, &got.Attempt, &got.Done, &got.Answer, &lease, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			// Released or expired between the insert and the select.
			return feature.Errorf(idempotency.EKeyInUse, "a request with Idempotency-Key %q has just ended: send it again", r.Key)
		}
		if err != nil {
			return err
		}
		got.LeaseUntil, got.Expires = lease.T, expires.T
		switch {
		case !got.Expires.After(now):
			_, err = tx.exec(`
				UPDATE idempotency_keys SET fingerprint = ?, attempt = ?, done = false, answer = NULL, lease_until = ?, expires_at = ?
				WHERE scope = ? AND key = ?`,
				r.Fingerprint, r.Attempt, db.d.Nanos(r.LeaseUntil), db.d.Nanos(r.Expires), r.Scope, r.Key)
			got, claimed = r, err == nil
			return err
		case got.Fingerprint != r.Fingerprint || got.Done || got.LeaseUntil.After(now):
			return nil
		}
		// Pending, and its lease is over: take it over.
		_, err = tx.exec(`
			UPDATE idempotency_keys SET attempt = ?, lease_until = ?
			WHERE scope = ? AND key = ?`,
			r.Attempt, db.d.Nanos(r.LeaseUntil), r.Scope, r.Key)
		got.Attempt, got.LeaseUntil, claimed = r.Attempt, r.LeaseUntil, err == nil
		return err
	})
	return got, claimed, err
}

// settle marks the pending key of s held by s.Attempt done with s.Answer,
// or returns idempotency.EKeyInUse when it is not so held; a nil s settles
// nothing. A write that carries s calls it last in its transaction, so
// that the key is committed with the write's change or not at all. The
// row stays held until the transaction ends.
func (tx *tx) settle(s *idempotency.Settlement) error {
	if s == nil {
		return nil
	}
	n, err := tx.affected(`
		UPDATE idempotency_keys SET done = true, answer = ?, expires_at = ?
		WHERE scope = ? AND key = ? AND attempt = ? AND NOT done`,
		s.Answer, tx.db.d.Nanos(s.Expires), s.Scope, s.Key, s.Attempt)
	if err != nil {
		return fmt.Errorf("finish Idempotency-Key %q: %w", s.Key, err)
	}
	if n == 0 {
		return feature.Errorf(idempotency.EKeyInUse, "the request with Idempotency-Key %q no longer holds the key (a retry took it over, or it expired): nothing was changed; send the request again to get its answer", s.Key)
	}
	return nil
}

// CompleteIdempotency settles s in a transaction of its own; see
// rollout.IdempotencyStore.
func (db *DB) CompleteIdempotency(ctx context.Context, s idempotency.Settlement) error {
	return db.writeTx(ctx, fmt.Sprintf("complete Idempotency-Key %q", s.Key), func(tx *tx) error {
		return tx.settle(&s)
	})
}

// ReleaseIdempotency deletes the key if attempt still holds it, pending.
func (db *DB) ReleaseIdempotency(ctx context.Context, scope, key, attempt string) error {
	return db.writeTx(ctx, fmt.Sprintf("release Idempotency-Key %q", key), func(tx *tx) error {
		_, err := tx.exec(`DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND attempt = ? AND NOT done`, scope, key, attempt)
		return err
	})
}

// ExpireIdempotency deletes the keys that expired at now.
func (db *DB) ExpireIdempotency(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := db.writeTx(ctx, "expire idempotency keys", func(tx *tx) (err error) {
		n, err = tx.affected(`DELETE FROM idempotency_keys WHERE expires_at <= ?`, db.d.Nanos(now))
		return err
	})
	return n, err
}
