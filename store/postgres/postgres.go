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
	"strings"
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

// probeTimeout bounds CheckWrite.
const probeTimeout = time.Second

// DB is a PostgreSQL database of features and their history, used through
// a pool of connections. A DB is safe for concurrent use, and any number of
// DBs, in any number of processes, may share one database.
type DB struct {
	pool         *pgxpool.Pool
	listenConfig *pgx.ConnConfig // of Notifications' own connections
	now          func() time.Time
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
	return &DB{pool: pool, listenConfig: listen, now: time.Now}, nil
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

// Close closes the pool, waiting for connections in use to be returned.
func (db *DB) Close() { db.pool.Close() }

// writeTx runs fn in a read-write transaction and commits it unless fn
// fails. Errors are wrapped as wrapErr does, with op.
func (db *DB) writeTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	if err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, fn); err != nil {
		return wrapErr(err, "%s", op)
	}
	return nil
}

// readTx runs fn in a read-only transaction that sees one snapshot.
func (db *DB) readTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	if err := pgx.BeginTxFunc(ctx, db.pool, opts, fn); err != nil {
		return wrapErr(err, "%s", op)
	}
	return nil
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
		}
		return ""
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
