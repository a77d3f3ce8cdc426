// Package postgres opens a store (package store) on a PostgreSQL database,
// for running many instances on one database, with pgx v5: its
// database/sql driver for the store, and a connection of its own for the
// notifications of each commit (LISTEN).
//
// Times of history entries, tokens and commits are kept to the microsecond
// (timestamptz); a feature's own times keep their nanoseconds, in its
// configuration.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/store"
)

// channel is the LISTEN/NOTIFY channel on which every writing transaction
// announces its revision.
const channel = "rollout_changes"

// Open connects to the PostgreSQL database dsn (a postgres:// URL or
// key=value string) through pgx's database/sql driver and applies the
// migrations it lacks, holding a session advisory lock meanwhile, so that
// instances starting at once migrate one after the other. The server is
// told to give up lock waits after store.DefaultTimeout, and to end
// sessions idle in a transaction for twice as long (unless the DSN sets
// lock_timeout or idle_in_transaction_session_timeout), so that an instance
// cut off mid-transaction does not hold its locks from the others. Errors
// of a server that cannot be reached carry feature.EUnavailable.
//
// The DB's Notifications listens on a pgx connection of its own. Any
// number of DBs, in any number of processes, may share one database.
func Open(ctx context.Context, dsn string) (*store.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// The error does not repeat the DSN, which may hold a password.
		return nil, fmt.Errorf("open database: %w", err)
	}
	op := fmt.Sprintf("open database %s on %s", cfg.Database, cfg.Host)
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for name, d := range map[string]time.Duration{
		"lock_timeout":                        store.DefaultTimeout,
		"idle_in_transaction_session_timeout": 2 * store.DefaultTimeout,
	} {
		if _, ok := cfg.RuntimeParams[name]; !ok {
			cfg.RuntimeParams[name] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	listen := cfg.Copy()
	listen.RuntimeParams["application_name"] = ListenerName
	pool := stdlib.OpenDB(*cfg)
	n := max(4, runtime.NumCPU())
	pool.SetMaxOpenConns(n)
	pool.SetMaxIdleConns(n)
	pool.SetConnMaxLifetime(time.Hour) // as pgxpool did
	pool.SetConnMaxIdleTime(30 * time.Minute)
	l := newListener(listen)
	d := store.Dialect{
		Write: pool, Read: pool, Probe: pool,
		ReadTx:      &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
		Dollar:      true,
		Collate:     ` COLLATE "C"`,
		Seq:         "seq",
		ForUpdate:   "FOR UPDATE",
		Time:        utc,
		Nanos:       utc,
		Seconds:     utc,
		Unavailable: unavailable,
		Constraint:  constraint,
		// One statement, which announces the revision on commit.
		InsertSpans: `INSERT INTO override_spans (feature_id, user_id, bucket, since)
			SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS integer[]))`,
		Commit: `
			WITH r AS (UPDATE revision SET revision = revision + 1 WHERE id = 1 RETURNING revision),
			     c AS (INSERT INTO commits (revision, kind, key, created_at, environment) SELECT revision, ?, ?, ?, ? FROM r)
			SELECT revision FROM r, pg_notify('` + channel + `', revision::text)`,
		Listen:  l.notifications,
		Catalog: catalog,
		Close: func() error {
			l.close() // the listeners first: they end, then the pool
			return pool.Close()
		},
	}
	if err := migrate(ctx, pool); err != nil {
		d.Close()
		return nil, d.WrapErr(err, "%s: migrate", op)
	}
	return store.New(d), nil
}

func utc(t time.Time) any { return t.UTC() }

// ListenerName is the application_name of the connections Notifications
// listens on.
const ListenerName = "rollout-listen"

// migrate applies the PostgreSQL migrations under goose's session advisory
// lock, tried every second for up to five minutes.
func migrate(ctx context.Context, db *sql.DB) error {
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	return store.Migrate(ctx, db, goose.DialectPostgres, migrations.Postgres, goose.WithSessionLocker(locker))
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

// constraint tells the constraint a statement violated by its SQLSTATE
// and, for unique violations, the name of the index: a table's primary key
// is its "_pkey".
func constraint(err error) store.Constraint {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	switch {
	case !ok:
		return store.NoConstraint
	case pe.Code == "23505" && strings.HasSuffix(pe.ConstraintName, "_pkey"):
		return store.PrimaryKey
	case pe.Code == "23505":
		return store.Unique
	case pe.Code == "23503":
		return store.ForeignKey
	}
	return store.NoConstraint
}

// catalog reads PostgreSQL's schema (information_schema, the current
// schema's tables) and the sequences of serial columns.
var catalog = store.Catalog{
	Tables: func(ctx context.Context, q store.Querier) ([]store.Table, error) {
		rows, err := q.QueryContext(ctx, `
			SELECT c.table_name, c.column_name, c.data_type, COALESCE(k.ordinal_position, 0),
			       c.is_identity = 'YES' OR COALESCE(c.column_default LIKE 'nextval(%', false)
			FROM information_schema.columns c
			JOIN information_schema.tables t
			  ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
			LEFT JOIN (information_schema.table_constraints tc
			           JOIN information_schema.key_column_usage k
			             ON k.constraint_schema = tc.constraint_schema AND k.constraint_name = tc.constraint_name)
			  ON tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = c.table_schema AND tc.table_name = c.table_name
			     AND k.column_name = c.column_name
			WHERE c.table_schema = current_schema()
			ORDER BY c.table_name, c.ordinal_position`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []store.Table
		for rows.Next() {
			var table string
			var c store.Column
			if err := rows.Scan(&table, &c.Name, &c.Type, &c.Key, &c.Serial); err != nil {
				return nil, err
			}
			out = store.AddColumn(out, table, c)
		}
		return out, rows.Err()
	},
	LastSerial: func(ctx context.Context, q store.Querier, table, column string) (int64, error) {
		var last int64
		err := q.QueryRowContext(ctx, `SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence($1, $2)::regclass), 0)`, table, column).Scan(&last)
		return last, err
	},
	SetSerial: func(ctx context.Context, q store.Querier, table, column string, last int64) error {
		_, err := q.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence($1, $2), $3, true)`, table, column, last)
		return err
	},
	Overriding: " OVERRIDING SYSTEM VALUE",
}
