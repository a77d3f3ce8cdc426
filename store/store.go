// Package store keeps features and their history in a SQLite database. Its
// DB implements rollout.Store.
package store

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
	"github.com/rollout/rollout/rollout"
)

// busyTimeout is how long a statement waits for a lock another connection
// or process holds before it fails with SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// DefaultTimeout bounds each transaction of the store (see DB.SetTimeout):
// a database that stops answering makes an operation fail with
// rollout.EUnavailable after it, rather than hold its caller forever.
const DefaultTimeout = 5 * time.Second

// probeTimeout bounds CheckWrite; its connection waits at most probeBusy
// for a lock.
const (
	probeTimeout = time.Second
	probeBusy    = 500 * time.Millisecond
)

// DB is a SQLite database of features and their history.
//
// Writes go through a pool of one connection whose transactions begin
// IMMEDIATE, so writers in this process queue in database/sql instead of
// meeting SQLITE_BUSY, and writers in other processes wait up to the busy
// timeout. Reads use a separate pool of read-only (query_only) connections
// whose transactions begin DEFERRED: in WAL mode they see the last commit and
// neither wait for nor block the writer.
//
// A DB is safe for concurrent use.
type DB struct {
	write *sql.DB
	read  *sql.DB
	probe *sql.DB // CheckWrite's own connection, with a short busy timeout
	now   func() time.Time
	path  string        // absolute
	busy  time.Duration // busy timeout
	file  os.FileInfo   // the database file as opened, to notice it moved
	// timeout bounds each transaction (DefaultTimeout); <= 0: none.
	timeout time.Duration
}

var _ rollout.Store = (*DB)(nil)

// Open opens the SQLite database at path, creating the file if needed,
// checks that it is in WAL mode with foreign keys enforced, and applies the
// migrations it lacks.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, busyTimeout)
}

func open(ctx context.Context, path string, busy time.Duration) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: no path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db, err := openPools(abs, busy)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := db.setUp(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// setUp wrote to the file, so it exists now.
	if db.file, err = os.Stat(abs); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

func openPools(path string, busy time.Duration) (*DB, error) {
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
	return &DB{write: write, read: read, probe: probe, now: time.Now, path: path, busy: busy, timeout: DefaultTimeout}, nil
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
func (db *DB) setUp(ctx context.Context) error {
	if err := checkSettings(ctx, db.write); err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.write, migrations.SQLite)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return checkSettings(ctx, db.read)
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

// SetTimeout sets how long each transaction may take before it is given up
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

// Close closes the database. Calls in progress may fail.
func (db *DB) Close() error {
	return errors.Join(db.read.Close(), db.write.Close(), db.probe.Close())
}

// Ping reports whether the database can be read and the write connection is
// free within ctx's deadline, for readiness checks. Errors of a busy or
// failing database carry rollout.EUnavailable.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.checkFile(); err != nil {
		return err
	}
	var one int
	err := db.read.QueryRowContext(ctx, "SELECT 1 FROM features LIMIT 1").Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return wrapErr(err, "ping database")
	}
	if err := db.write.PingContext(ctx); err != nil {
		return wrapErr(err, "ping database")
	}
	return nil
}

// Backup writes a consistent copy of the database to a new file at path
// while the database stays in use, and syncs it to disk. It refuses, with
// rollout.EConflict, to overwrite an existing file.
func (db *DB) Backup(ctx context.Context, path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	switch _, err := os.Lstat(abs); {
	case err == nil:
		return rollout.Errorf(rollout.EConflict, "backup target %s already exists: choose a new file name", path)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	// VACUUM INTO reads in one read transaction, so the copy is a snapshot
	// of the last commit and writers go on meanwhile. It fails itself if
	// the file appears in the meantime. abs starts with '/', so SQLite does
	// not take it for a URI. It needs a connection that may write files,
	// which the read pool's are not, and must not hold up the writer.
	conn, err := sql.Open("sqlite3", dsn(db.path, db.busy, false))
	if err != nil {
		return fmt.Errorf("back up database to %s: %w", path, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", abs); err != nil {
		return wrapErr(err, "back up database to %s", path)
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

// wrapErr returns err as is when it is a *rollout.Error, and otherwise wraps
// it with the operation the format names. Errors of a database that cannot
// be used right now (busy, locked, read-only, full, failing I/O, cannot be
// opened) also wrap a rollout.EUnavailable *Error, whose message says so
// without the driver's details.
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

// unavailable returns the user-facing message for an error of the database
// rather than of the request, or "".
func unavailable(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "the database did not answer in time: try again shortly"
	}
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

// constraint returns the extended code of a constraint violation, or 0.
func constraint(err error) sqlite3.ErrNoExtended {
	if se, ok := errors.AsType[sqlite3.Error](err); ok && se.Code == sqlite3.ErrConstraint {
		return se.ExtendedCode
	}
	return 0
}

// checkFile refuses to go on when the database file at db.path is no longer
// the one opened: moved away or deleted, writes would go to a file nobody
// will open again, and be lost.
func (db *DB) checkFile() error {
	if db.file == nil {
		return nil
	}
	now, err := os.Stat(db.path)
	if err != nil || !os.SameFile(db.file, now) {
		return rollout.Errorf(rollout.EUnavailable, "the database file %s is gone (moved or deleted): changes are refused until it is back", db.path)
	}
	return nil
}

// writeTx runs fn in a write transaction, after checking the database file
// is still where it was opened, and commits it unless fn fails, all within
// the DB's timeout. When ctx carries an idempotency claim with a settled
// answer (rollout.Claim.Answer) once fn has run, the transaction also
// marks the claim's key done with that answer, and fails with
// rollout.EKeyInUse, committing nothing, if the key is no longer the
// claim's. Errors are wrapped as
// wrapErr does, with op.
func (db *DB) writeTx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	claim := rollout.ClaimFrom(ctx)
	if claim == nil {
		return db.plainWriteTx(ctx, op, fn)
	}
	kept := false
	err := db.plainWriteTx(ctx, op, func(tx *sql.Tx) error {
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
func (db *DB) plainWriteTx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	if err := db.checkFile(); err != nil {
		return err
	}
	ctx, cancel := db.bound(ctx)
	defer cancel()
	return inTx(ctx, db.write, op, fn)
}

// readTx runs fn in a read transaction of the read pool, within the DB's
// timeout: one snapshot of the last commit.
func (db *DB) readTx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	return inTx(ctx, db.read, op, fn)
}

func inTx(ctx context.Context, pool *sql.DB, op string, fn func(*sql.Tx) error) error {
	tx, err := pool.BeginTx(ctx, nil)
	if err != nil {
		return wrapErr(err, "%s", op)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return wrapErr(err, "%s", op)
	}
	if err := tx.Commit(); err != nil {
		return wrapErr(err, "%s", op)
	}
	return nil
}
