// Package postgres keeps features, their history, tokens and the change
// feed in a PostgreSQL database, for running many instances on one
// database. Its DB implements rollout.Store and rollout.TokenStore with the
// same semantics as the SQLite store (package store); both pass the
// contract of package storetest.
//
// Times of history entries, tokens and commits are kept to the microsecond
// (timestamptz); a feature's own times keep their nanoseconds, in its
// configuration.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/rollout"
)

// channel is the LISTEN/NOTIFY channel on which every writing transaction
// announces its revision.
const channel = "rollout_changes"

// DefaultTimeout bounds each operation of the store (see DB.SetTimeout): a
// server or network that stops answering makes an operation fail with
// rollout.EUnavailable after it, rather than hold its caller forever. The
// server is also told to give up lock waits after it, and to end sessions
// idle in a transaction for twice as long (unless the DSN sets lock_timeout
// or idle_in_transaction_session_timeout), so that an instance cut off
// mid-transaction does not hold its locks from the others.
const DefaultTimeout = 5 * time.Second

// probeTimeout bounds CheckWrite.
const probeTimeout = time.Second

// DB is a PostgreSQL database of features and their history, used through
// a pool of connections. A DB is safe for concurrent use, and any number of
// DBs, in any number of processes, may share one database.
type DB struct {
	pool         *pgxpool.Pool
	listenConfig *pgx.ConnConfig // of Notifications' own connections
	now          func() time.Time
	timeout      time.Duration // bounds each operation; <= 0: none

	// life ends at Close, and with it every Notifications listener;
	// Close waits for them.
	life      context.Context
	end       context.CancelFunc
	listeners sync.WaitGroup
}

var (
	_ rollout.Store      = (*DB)(nil)
	_ rollout.TokenStore = (*DB)(nil)
)

// Open connects to the PostgreSQL database dsn (a postgres:// URL or
// key=value string) and applies the migrations it lacks, holding a session
// advisory lock meanwhile, so that instances starting at once migrate one
// after the other. Errors of a server that cannot be reached carry
// rollout.EUnavailable.
func Open(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The error does not repeat the DSN, which may hold a password.
		return nil, fmt.Errorf("open database: %w", err)
	}
	op := fmt.Sprintf("open database %s on %s", cfg.ConnConfig.Database, cfg.ConnConfig.Host)
	if err := migrate(ctx, cfg.ConnConfig); err != nil {
		return nil, wrapErr(err, "%s: migrate", op)
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	params := cfg.ConnConfig.RuntimeParams
	for name, d := range map[string]time.Duration{
		"lock_timeout":                        DefaultTimeout,
		"idle_in_transaction_session_timeout": 2 * DefaultTimeout,
	} {
		if _, ok := params[name]; !ok {
			params[name] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, wrapErr(err, "%s", op)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, wrapErr(err, "%s", op)
	}
	listen := cfg.ConnConfig.Copy()
	if listen.RuntimeParams == nil {
		listen.RuntimeParams = map[string]string{}
	}
	listen.RuntimeParams["application_name"] = ListenerName
	life, end := context.WithCancel(context.Background())
	return &DB{pool: pool, listenConfig: listen, now: time.Now, timeout: DefaultTimeout, life: life, end: end}, nil
}

// ListenerName is the application_name of the connections Notifications
// listens on.
const ListenerName = "rollout-listen"

// migrate applies the PostgreSQL migrations through database/sql, which
// goose needs, under goose's session advisory lock, tried every second for
// up to five minutes.
func migrate(ctx context.Context, cc *pgx.ConnConfig) error {
	sqlDB := stdlib.OpenDB(*cc)
	defer sqlDB.Close()
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.Postgres, goose.WithSessionLocker(locker))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// Close stops the listeners of Notifications and waits for them, then
// closes the pool, waiting for connections in use to be returned.
func (db *DB) Close() {
	db.end()
	db.listeners.Wait()
	db.pool.Close()
}

// SetTimeout sets how long each operation may take before it is given up
// with rollout.EUnavailable (DefaultTimeout unless set; <= 0: no bound).
// Call it before the DB is in use.
func (db *DB) SetTimeout(d time.Duration) { db.timeout = d }

// bound returns ctx with the DB's timeout.
func (db *DB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if db.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, db.timeout)
}

// writeTx runs fn in a read-write transaction and commits it unless fn
// fails, within the DB's timeout. When ctx carries an idempotency claim
// with a settled answer (rollout.Claim.Answer) once fn has run, the
// transaction also marks the claim's key done with that answer, and fails
// with rollout.EKeyInUse, committing nothing, if the key is no longer the
// claim's. Errors are wrapped as wrapErr does, with op.
func (db *DB) writeTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	claim := rollout.ClaimFrom(ctx)
	if claim == nil {
		return db.inTx(ctx, op, pgx.TxOptions{}, fn)
	}
	kept := false
	err := db.inTx(ctx, op, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		// fn may settle the claim itself (UpdateFeatureWith).
		done, keep, err := claim.Answer()
		if err != nil || !keep {
			return err
		}
		kept = true
		return finishIdempotency(ctx, tx, done)
	})
	if err == nil && kept {
		claim.Committed()
	}
	return err
}

// plainWriteTx is writeTx without the idempotency claim ctx may carry.
func (db *DB) plainWriteTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	return db.inTx(ctx, op, pgx.TxOptions{}, fn)
}

// readTx runs fn in a read-only transaction that sees one snapshot, within
// the DB's timeout.
func (db *DB) readTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	return db.inTx(ctx, op, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// inTx runs fn in a transaction of opts and commits it unless fn fails.
// Every statement fn runs, whatever context it is given, ends by the DB's
// timeout from now, as do the transaction's begin and commit.
func (db *DB) inTx(ctx context.Context, op string, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	bounded, cancel := db.bound(ctx)
	defer cancel()
	tx := &boundTx{bound: bounded}
	defer tx.cancel()
	err := pgx.BeginTxFunc(bounded, db.pool, opts, func(t pgx.Tx) error {
		tx.Tx = t
		return fn(tx)
	})
	if err != nil {
		return wrapErr(err, "%s", op)
	}
	return nil
}

// boundTx is a transaction whose statements end when bound does, as well
// as when their own context does.
type boundTx struct {
	pgx.Tx
	bound   context.Context
	cancels []context.CancelFunc
}

// ctx returns the context of a statement given ctx: bounded by t.bound's
// deadline as well. The statement's rows may be read after it returns, so
// the context is cancelled only when the transaction ends.
func (t *boundTx) ctx(ctx context.Context) context.Context {
	if ctx == t.bound {
		return ctx
	}
	d, ok := t.bound.Deadline()
	if !ok {
		return ctx
	}
	c, cancel := context.WithDeadline(ctx, d)
	t.cancels = append(t.cancels, cancel)
	return c
}

func (t *boundTx) cancel() {
	for _, c := range t.cancels {
		c()
	}
}

func (t *boundTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(t.ctx(ctx), sql, args...)
}

func (t *boundTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(t.ctx(ctx), sql, args...)
}

func (t *boundTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(t.ctx(ctx), sql, args...)
}

func (t *boundTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.Tx.SendBatch(t.ctx(ctx), b)
}

func (t *boundTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.Tx.CopyFrom(t.ctx(ctx), table, columns, src)
}

// wrapErr returns err as is when it is a *rollout.Error, and otherwise wraps
// it with the operation the format names. Errors of a server that cannot
// be used right now also wrap a rollout.EUnavailable *Error, whose message
// says so without the driver's details.
func wrapErr(err error, format string, args ...any) error {
	if _, ok := errors.AsType[*rollout.Error](err); ok {
		return err
	}
	op := fmt.Sprintf(format, args...)
	if msg := unavailable(err); msg != "" {
		return fmt.Errorf("%s: %w: %w", op, rollout.Errorf(rollout.EUnavailable, "%s", msg), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unavailable returns the user-facing message for an error of the server
// or the connection to it rather than of the request, or "". It decides by
// SQLSTATE and error types, never by message text.
func unavailable(err error) string {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return "the connection to the database failed: try again shortly"
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin shutdown, crash shutdown, cannot connect now
			return "the database server is shutting down or starting: try again shortly"
		case strings.HasPrefix(pe.Code, "53"): // insufficient resources: disk full, out of memory, too many connections
			return "the database server is out of resources (disk, memory or connections): changes cannot be saved"
		case pe.Code == "25006": // read-only SQL transaction: a standby
			return "the database is read-only: changes cannot be saved"
		case pe.Code == "57014", pe.Code == "55P03", pe.Code == "25P03": // statement timeout (or cancelled), lock timeout, idle in transaction timeout
			return "the database did not answer in time: try again shortly"
		}
		return ""
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the database did not answer in time: try again shortly"
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return "the database server cannot be reached"
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return "the connection to the database failed: try again shortly"
	}
	for _, target := range []error{io.EOF, io.ErrUnexpectedEOF, pgconn.ErrConnClosed, syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, target) {
			return "the connection to the database failed: try again shortly"
		}
	}
	return ""
}

// sqlState returns the SQLSTATE of a server error, or "".
func sqlState(err error) (code, constraint string) {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code, pe.ConstraintName
	}
	return "", ""
}

const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)
