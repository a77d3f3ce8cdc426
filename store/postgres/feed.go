package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollout/rollout/rollout"
)

// sessionKeySize is the length of the session key in bytes.
const sessionKeySize = 32

// addCommit takes the next revision, records the change of kind to key at
// time at as its commit, and notifies listeners of the revision when the
// transaction commits. It must be the transaction's last write: the
// UPDATE locks the one revision row until the transaction ends, so writers
// take revisions one after the other, each after the previous one has
// committed (or rolled back, its revision then given out again). No reader
// can therefore see revision n+1 committed while n is not.
func addCommit(ctx context.Context, tx pgx.Tx, kind rollout.CommitKind, key string, at time.Time) error {
	var rev int64
	err := tx.QueryRow(ctx, `
		WITH r AS (UPDATE revision SET revision = revision + 1 WHERE id = 1 RETURNING revision),
		     c AS (INSERT INTO commits (revision, kind, key, created_at) SELECT revision, $1, $2, $3 FROM r)
		SELECT revision, pg_notify('`+channel+`', revision::text) FROM r`,
		string(kind), key, at.UTC()).Scan(&rev, nil)
	if err != nil {
		return fmt.Errorf("record commit: %w", err)
	}
	return nil
}

// Revision returns the revision of the last commit, 0 when there is none.
func (db *DB) Revision(ctx context.Context) (int64, error) {
	var rev int64
	ctx, cancel := db.bound(ctx)
	defer cancel()
	if err := db.pool.QueryRow(ctx, `SELECT revision FROM revision WHERE id = 1`).Scan(&rev); err != nil {
		return 0, wrapErr(err, "read revision")
	}
	return rev, nil
}

// Commits returns the commits with a revision above since, oldest first, at
// most limit of them (all when limit <= 0).
func (db *DB) Commits(ctx context.Context, since int64, limit int) ([]rollout.Commit, error) {
	var n *int
	if limit > 0 {
		n = &limit
	}
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, err := db.pool.Query(ctx, `
		SELECT revision, kind, key, created_at FROM commits
		WHERE revision > $1 ORDER BY revision LIMIT $2`, since, n)
	if err != nil {
		return nil, wrapErr(err, "list commits since revision %d", since)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rollout.Commit, error) {
		var (
			c    rollout.Commit
			kind string
		)
		err := row.Scan(&c.Revision, &kind, &c.Key, &c.Time)
		c.Kind, c.Time = rollout.CommitKind(kind), c.Time.UTC()
		return c, err
	})
	if err != nil {
		return nil, wrapErr(err, "list commits since revision %d", since)
	}
	return out, nil
}

// SessionKey returns the 32-byte session key kept in the database, making
// it on the first call. Instances calling it at once for the first time all
// get the key the first of them stored: the insert of the others waits for
// that one to commit, does nothing, and they read its key.
func (db *DB) SessionKey(ctx context.Context) ([]byte, error) {
	const op = "read session key"
	var key []byte
	bounded, cancel := db.bound(ctx)
	defer cancel()
	err := db.pool.QueryRow(bounded, `SELECT value FROM settings WHERE name = 'session_key'`).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		fresh := make([]byte, sessionKeySize)
		rand.Read(fresh)
		err = db.writeTx(ctx, op, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `
				INSERT INTO settings (name, value) VALUES ('session_key', $1)
				ON CONFLICT (name) DO NOTHING`, fresh); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT value FROM settings WHERE name = 'session_key'`).Scan(&key)
		})
	}
	if err != nil {
		return nil, wrapErr(err, "%s", op)
	}
	if len(key) != sessionKeySize {
		return nil, fmt.Errorf("%s: stored key has %d bytes, want %d", op, len(key), sessionKeySize)
	}
	return key, nil
}

// CheckWrite updates the one row of the write_probe table in a transaction,
// giving up after a second. It returns rollout.EUnavailable when the write
// fails because the server cannot be reached or used, or does not answer in
// time.
func (db *DB) CheckWrite(ctx context.Context) error {
	const op = "check writes"
	probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := db.writeTx(probeCtx, op, func(tx pgx.Tx) error {
		_, err := tx.Exec(probeCtx, `UPDATE write_probe SET checked_at = now() WHERE id = 1`)
		return err
	})
	if err != nil && ctx.Err() == nil && probeCtx.Err() != nil {
		if _, ok := errors.AsType[*rollout.Error](err); !ok {
			return fmt.Errorf("%w: %w", rollout.Errorf(rollout.EUnavailable, "the database did not take a write within %v", probeTimeout), err)
		}
	}
	return err
}

// Notifications listens on a connection of its own for the revisions
// writers announce, and sends each on the returned channel until ctx is
// done, when it closes the channel. Sends never block: when the reader is
// behind, the channel holds only the highest revision not yet received.
//
// Each time the listener is in place, on the first connection and again
// after a lost connection is made anew (tried with growing pauses, up to
// 5 s), it also sends the current revision, so that the reader checks for
// changes it was not told of. Once that first value is received, every
// later commit is announced.
//
// The listener also stops when the DB is closed, and Close waits for it:
// call Notifications before Close.
func (db *DB) Notifications(ctx context.Context) <-chan int64 {
	ch := make(chan int64, 1)
	db.listeners.Go(func() {
		defer close(ch)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(db.life, cancel)()
		const minPause, maxPause = 50 * time.Millisecond, 5 * time.Second
		pause := minPause
		for ctx.Err() == nil {
			if err := db.listen(ctx, ch, func() { pause = minPause }); err == nil || ctx.Err() != nil {
				return
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return
			}
			pause = min(2*pause, maxPause)
		}
	})
	return ch
}

// listen connects, listens, sends the current revision and then each
// notified one on ch until the connection fails or ctx is done. connected
// is called once the listener is in place.
func (db *DB) listen(ctx context.Context, ch chan int64, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, db.listenConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	var rev int64
	if err := conn.QueryRow(ctx, `SELECT revision FROM revision WHERE id = 1`).Scan(&rev); err != nil {
		return err
	}
	connected()
	offer(ch, rev)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		rev, err := strconv.ParseInt(n.Payload, 10, 64)
		if err != nil {
			continue // not ours
		}
		offer(ch, rev)
	}
}

// offer sends rev on ch without blocking, replacing a value the reader has
// not taken yet (keeping the higher). Only one goroutine may offer on ch.
func offer(ch chan int64, rev int64) {
	select {
	case ch <- rev:
		return
	default:
	}
	select {
	case old := <-ch:
		rev = max(rev, old)
	default:
	}
	ch <- rev // the only sender just emptied the buffer, or the reader did
}
