// Package sqlite opens a store (package store) on a SQLite database file
// with mattn/go-sqlite3.
//
// Writes go through a pool of one connection whose transactions begin
// IMMEDIATE, so writers in this process queue in database/sql instead of
// meeting SQLITE_BUSY, and writers in other processes wait up to the busy
// timeout. Reads use a separate pool of read-only (query_only) connections
// whose transactions begin DEFERRED: in WAL mode they see the last commit
// and neither wait for nor block the writer. A database file moved away or
// deleted while open refuses writes, which would be lost.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
	"github.com/pressly/goose/v3"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
)

// busyTimeout is how long a statement waits for a lock another connection
// or process holds before it fails with SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// probeBusy is the busy timeout of CheckWrite's connection.
const probeBusy = 500 * time.Millisecond

// Open opens the SQLite database at path, creating the file if needed,
// checks that it is in WAL mode with foreign keys enforced, and applies the
// migrations it lacks.
func Open(ctx context.Context, path string) (*store.DB, error) {
	db, _, err := open(ctx, path, busyTimeout)
	return db, err
}

// file is an open database file.
type file struct {
	write, read, probe *sql.DB
	path               string        // absolute
	busy               time.Duration // busy timeout
	info               os.FileInfo   // the file as opened, to notice it moved
}

func open(ctx context.Context, path string, busy time.Duration) (*store.DB, *file, error) {
	if path == "" {
		return nil, nil, errors.New("open database: no path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open database %s: %w", path, err)
	}
	f, err := openPools(abs, busy)
	if err != nil {
		return nil, nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := f.setUp(ctx); err != nil {
		f.close()
		return nil, nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// setUp wrote to the file, so it exists now.
	if f.info, err = os.Stat(abs); err != nil {
		f.close()
		return nil, nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return store.New(f.dialect()), f, nil
}

func openPools(path string, busy time.Duration) (*file, error) {
	write, err := sql.Open("sqlite3", dsn(path, busy, false))
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	read, err := sql.Open("sqlite3", dsn(path, busy, true))
	if err != nil {
		write.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	read.SetMaxOpenConns(n)
	read.SetMaxIdleConns(n)

	probe, err := sql.Open("sqlite3", dsn(path, min(busy, probeBusy), false))
	if err != nil {
		read.Close()
		write.Close()
		return nil, err
	}
	probe.SetMaxOpenConns(1)
	probe.SetMaxIdleConns(1)
	return &file{write: write, read: read, probe: probe, path: path, busy: busy}, nil
}

func (f *file) close() error {
	return errors.Join(f.read.Close(), f.write.Close(), f.probe.Close())
}

func (f *file) dialect() store.Dialect {
	return store.Dialect{
		Write: f.write, Read: f.read, Probe: f.probe,
		Seq:         "rowid",
		Time:        func(t time.Time) any { return t.UTC().Format(store.TimeLayout) },
		Nanos:       func(t time.Time) any { return t.UnixNano() },
		Seconds:     func(t time.Time) any { return t.Unix() },
		Unavailable: unavailable,
		Constraint:  constraint,
		Check:       f.check,
		Backup:      f.backup,
		Close:       f.close,
		Catalog:     catalog,
	}
}

// dsn returns the mattn/go-sqlite3 data source name of the database file at
// the absolute path. The settings are in the DSN so that every connection a
// pool opens gets them. The path is URL-escaped: SQLite decodes it, and the
// driver splits its own parameters at the first '?'.
func dsn(path string, busy time.Duration, readOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "FULL")
	if readOnly {
		q.Set("_txlock", "deferred")
		q.Set("_query_only", "on")
	} else {
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}
	return u.String()
}

// setUp checks the connection settings of both pools and migrates the
// database.
func (f *file) setUp(ctx context.Context) error {
	if err := checkSettings(ctx, f.write); err != nil {
		return err
	}
	if err := store.Migrate(ctx, f.write, goose.DialectSQLite3, migrations.SQLite); err != nil {
		return err
	}
	return checkSettings(ctx, f.read)
}

// checkSettings reports whether a connection of pool has taken the DSN's
// settings: SQLite falls back silently to another journal mode when WAL is
// not possible, and has no foreign keys when built without them.
func checkSettings(ctx context.Context, pool *sql.DB) error {
	var mode string
	if err := pool.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, not wal: the file system may not support WAL", mode)
	}
	var fk int
	if err := pool.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return fmt.Errorf("read foreign_keys: %w", err)
	}
	if fk != 1 {
		return errors.New("foreign keys are not enforced")
	}
	return nil
}

// backup writes a consistent copy of the database to a new file at path
// while the database stays in use, and syncs it to disk. It refuses, with
// feature.EConflict, to overwrite an existing file.
func (f *file) backup(ctx context.Context, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	switch _, err := os.Lstat(abs); {
	case err == nil:
		return feature.Errorf(feature.EConflict, "backup target %s already exists: choose a new file name", path)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	// VACUUM INTO reads in one read transaction, so the copy is a snapshot
	// of the last commit and writers go on meanwhile. It fails itself if
	// the file appears in the meantime. abs starts with '/', so SQLite does
	// not take it for a URI. It needs a connection that may write files,
	// which the read pool's are not, and must not hold up the writer.
	conn, err := sql.Open("sqlite3", dsn(f.path, f.busy, false))
	if err != nil {
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", abs); err != nil {
		d := f.dialect()
		return d.WrapErr(err, "back up database to %s", path)
	}
	// SQLite does not sync the file VACUUM INTO writes.
	if err := syncFile(abs); err != nil {
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	if err := syncFile(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// unavailable returns the user-facing message for an error of the database
// rather than of the request, or "".
func unavailable(err error) string {
	se, ok := errors.AsType[sqlite3.Error](err)
	if !ok {
		return ""
	}
	switch se.Code {
	case sqlite3.ErrInterrupt:
		return "the database did not answer in time: try again shortly"
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return "the database is busy: try again shortly"
	case sqlite3.ErrReadonly:
		return "the database is read-only: changes cannot be saved"
	case sqlite3.ErrFull:
		return "the disk holding the database is full: changes cannot be saved"
	case sqlite3.ErrIoErr:
		return "the database could not be read or written"
	case sqlite3.ErrCantOpen:
		return "the database file cannot be opened"
	}
	return ""
}

// constraint tells the constraint a statement violated by its extended
// code.
func constraint(err error) store.Constraint {
	se, ok := errors.AsType[sqlite3.Error](err)
	if !ok || se.Code != sqlite3.ErrConstraint {
		return store.NoConstraint
	}
	switch se.ExtendedCode {
	case sqlite3.ErrConstraintUnique:
		return store.Unique
	case sqlite3.ErrConstraintPrimaryKey:
		return store.PrimaryKey
	case sqlite3.ErrConstraintForeignKey:
		return store.ForeignKey
	}
	return store.NoConstraint
}

// check refuses to go on when the database file at f.path is no longer
// the one opened: moved away or deleted, writes would go to a file nobody
// will open again, and be lost.
func (f *file) check() error {
	now, err := os.Stat(f.path)
	if err != nil || !os.SameFile(f.info, now) {
		return feature.Errorf(feature.EUnavailable, "the database file %s is gone (moved or deleted): changes are refused until it is back", f.path)
	}
	return nil
}

// catalog reads SQLite's schema (sqlite_master) and its AUTOINCREMENT
// counters (sqlite_sequence).
var catalog = store.Catalog{
	Tables: func(ctx context.Context, q store.Querier) ([]store.Table, error) {
		rows, err := q.QueryContext(ctx, `
			SELECT m.name, p.name, lower(p.type), p.pk, m.sql LIKE '%AUTOINCREMENT%'
			FROM sqlite_master m, pragma_table_info(m.name) p
			WHERE m.type = 'table'
			ORDER BY m.name, p.cid`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []store.Table
		for rows.Next() {
			var table string
			var c store.Column
			var auto bool
			if err := rows.Scan(&table, &c.Name, &c.Type, &c.Key, &auto); err != nil {
				return nil, err
			}
			// Only an INTEGER PRIMARY KEY can be AUTOINCREMENT.
			c.Serial = auto && c.Key == 1 && c.Type == "integer"
			out = store.AddColumn(out, table, c)
		}
		return out, rows.Err()
	},
	LastSerial: func(ctx context.Context, q store.Querier, table, _ string) (int64, error) {
		var last int64
		err := q.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = ?`, table).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		return last, err
	},
	SetSerial: func(ctx context.Context, q store.Querier, table, _ string, last int64) error {
		res, err := q.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?`, last, table)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		_, err = q.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)`, table, last)
		return err
	},
}
