// Package store keeps features, their history, tokens, webhooks, exposures,
// ramps, experiments and the change feed in a SQL database through database/sql. Its DB
// implements the interfaces of its consumers (rollout.Store, auth.Store,
// webhook.Store and webhook.Outbox) once for every database;
// what differs between them (placeholders, error codes, time encoding,
// collation, notifications, backup, connection setup) is a Dialect, which
// the packages store/sqlite and store/postgres provide. Both pass the
// contract of package storetest. Copy and Compare (copy.go) move a whole
// database into another of either dialect, every table of the schema but
// those SkippedTables names, and compare the two.
//
// The package's files, one per part of what it keeps: store.go (DB, its
// transactions, migrations, CheckWrite), feature.go (features and their
// versions), archive.go, segment.go (user lists' users a row each), ramp.go,
// schedule.go (scheduled changes and their claims), request.go (change requests
// and the settings), batch.go (documents' batches), exposure.go,
// audit.go (the audit trail), feed.go (the change feed and the session
// key), idempotency.go, token.go (tokens and signed-out sessions),
// session.go (people's single sign-on sessions), webhook.go (webhooks and
// their delivery log), experiment.go (metrics, tracked events, experiments
// and their users), copy.go.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// DefaultTimeout bounds each transaction of the store (see DB.SetTimeout):
// a database that stops answering makes an operation fail with
// feature.EUnavailable after it, rather than hold its caller forever.
const DefaultTimeout = 5 * time.Second

// probeTimeout bounds CheckWrite.
const probeTimeout = time.Second

// Constraint is the kind of constraint a statement violated.
type Constraint int

// The constraints a Dialect tells apart.
const (
	NoConstraint Constraint = iota
	Unique                  // a unique index other than the primary key
	PrimaryKey
	ForeignKey
)

// Dialect is what a database needs of its own. Its functions must be safe
// for concurrent use.
type Dialect struct {
	// Write runs write transactions; Read runs read transactions and
	// single reads; Probe runs CheckWrite's transaction. Read and Probe
	// may be Write.
	Write, Read, Probe *sql.DB
	// ReadTx are the options of read transactions: one snapshot.
	ReadTx *sql.TxOptions
	// Dollar: placeholders are $1, $2, … rather than ?.
	Dollar bool
	// Collate follows text columns that results are ordered by, so that
	// they sort by bytes.
	Collate string
	// Seq is the column of versions that numbers them in insertion order.
	Seq string
	// ForUpdate, when not "", follows a SELECT to lock the rows it reads
	// until the transaction ends: a database whose write transactions do
	// not take turns needs it.
	ForUpdate string
	// Time, Nanos and Seconds encode a time for a timestamp column, an
	// idempotency key's times and an exposure batch's time.
	Time, Nanos, Seconds func(time.Time) any
	// Unavailable returns the user-facing message of an error of the
	// database rather than of the request, or "".
	Unavailable func(error) string
	// Constraint returns the kind of constraint err violated, if any.
	Constraint func(error) Constraint
	// Commit, when not "", records a commit of (kind, key, time) under
	// the next revision, which it returns, in one statement (and may
	// announce it); otherwise two statements do.
	Commit string
	// InsertSpans, when not "", inserts many override spans in one
	// statement from four arrays (? placeholders): feature IDs, user IDs,
	// buckets and versions (since).
	InsertSpans string
	// Check, when not nil, is called before each write and by Ping: it
	// refuses with feature.EUnavailable to use a database that is gone.
	Check func() error
	// Listen, when not nil, is what DB.Notifications returns.
	Listen func(ctx context.Context) <-chan int64
	// Backup, when not nil, writes a consistent copy of the database to a
	// new file.
	Backup func(ctx context.Context, path string) error
	// Close closes the pools.
	Close func() error
	// Catalog reads the schema and the sequences, for Copy and Compare.
	Catalog Catalog
}

// DB is a database of features and their history. A DB is safe for
// concurrent use.
type DB struct {
	d       Dialect
	now     func() time.Time
	timeout time.Duration // bounds each transaction; <= 0: none
	marks   *strings.Replacer
	// env is the environment whose features, ramps, requests, settings
	// and audit events the DB reads and writes (see In).
	env string
}

var (
	_ rollout.Store = (*DB)(nil)
	_ auth.Store    = (*DB)(nil)
)

// New returns a DB on the database of d, whose migrations have been
// applied.
func New(d Dialect) *DB {
	return &DB{
		d: d, now: time.Now, timeout: DefaultTimeout,
		marks: strings.NewReplacer("{C}", d.Collate, "{seq}", d.Seq, "{forUpdate}", d.ForUpdate),
		env:   rollout.Production,
	}
}

// In returns the DB bound to the environment env: its features, their
// history, ramps, change requests, settings, audit events and commits are
// env's. Segments, tokens, webhooks and idempotency keys are shared by
// every environment. New's DB is production's. Set the timeout (SetTimeout)
// before calling In: the copy keeps the one it has then.
func (db *DB) In(env string) *DB {
	c := *db
	c.env = env
	return &c
}

// Environment returns the environment the DB is bound to.
func (db *DB) Environment() string { return db.env }

// Migrate applies the migrations of fsys that db lacks with goose.
func Migrate(ctx context.Context, db *sql.DB, dialect goose.Dialect, fsys fs.FS, opts ...goose.ProviderOption) error {
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// SetTimeout sets how long each transaction may take before it is given up
// with feature.EUnavailable (DefaultTimeout unless set; <= 0: no bound).
// Call it before the DB is in use.
func (db *DB) SetTimeout(d time.Duration) { db.timeout = d }

// Close closes the database, waiting for connections in use to be
// returned.
func (db *DB) Close() error { return db.d.Close() }

// Notifications returns the revisions writers announce, when the database
// announces them (see postgres.Open), and nil otherwise.
func (db *DB) Notifications(ctx context.Context) <-chan int64 {
	if db.d.Listen == nil {
		return nil
	}
	return db.d.Listen(ctx)
}

// Backup writes a consistent copy of the database to a new file at path
// while the database stays in use. It refuses, with feature.EConflict, to
// overwrite an existing file.
func (db *DB) Backup(ctx context.Context, path string) error {
	if db.d.Backup == nil {
		return errors.New("back up database: this database is backed up with its own tools")
	}
	return db.d.Backup(ctx, path)
}

// Ping reports whether the database can be read and a write connection is
// free within ctx's deadline, for readiness checks. Errors of a busy or
// failing database carry feature.EUnavailable.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.check(); err != nil {
		return err
	}
	var one int
	err := db.d.Read.QueryRowContext(ctx, "SELECT 1 FROM features LIMIT 1").Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return db.d.WrapErr(err, "ping database")
	}
	if err := db.d.Write.PingContext(ctx); err != nil {
		return db.d.WrapErr(err, "ping database")
	}
	return nil
}

// CheckWrite writes the one row of the write_probe table in a transaction
// of the probe pool, giving up after a second. It returns
// feature.EUnavailable when the write fails: another process holds the
// write lock, the disk is full, the database is read-only, gone or cannot
// be reached.
func (db *DB) CheckWrite(ctx context.Context) error {
	const op = "check writes"
	if err := db.check(); err != nil {
		return err
	}
	probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := db.inTx(probeCtx, db.d.Probe, nil, op, func(tx *tx) error {
		_, err := tx.exec(`UPDATE write_probe SET checked_at = ? WHERE id = 1`, db.d.Time(db.now()))
		return err
	})
	if err != nil && ctx.Err() == nil && probeCtx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", op, feature.Errorf(feature.EUnavailable, "the database did not take a write within %v", probeTimeout), err)
	}
	return err
}

func (db *DB) check() error {
	if db.d.Check == nil {
		return nil
	}
	return db.d.Check()
}

// WrapErr returns err as is when it is a *feature.Error, and otherwise wraps
// it with the operation the format names. Errors of a database that cannot
// be used right now (no answer in time, and what d.Unavailable tells) also
// wrap a feature.EUnavailable *Error, whose message says so without the
// driver's details.
func (d *Dialect) WrapErr(err error, format string, args ...any) error {
	if _, ok := errors.AsType[*feature.Error](err); ok {
		return err
	}
	op := fmt.Sprintf(format, args...)
	if msg := d.unavailable(err); msg != "" {
		return fmt.Errorf("%s: %w: %w", op, feature.Errorf(feature.EUnavailable, "%s", msg), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (d *Dialect) unavailable(err error) string {
	if msg := d.Unavailable(err); msg != "" {
		return msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the database did not answer in time: try again shortly"
	}
	return ""
}

// writeTx runs fn in a write transaction, after the dialect's Check, and
// commits it unless fn fails, all within the DB's timeout. Errors are
// wrapped as WrapErr does, with op. A write that settles an idempotency
// key (idempotency.Settlement) does so as the last step of fn (tx.settle).
func (db *DB) writeTx(ctx context.Context, op string, fn func(*tx) error) error {
	return db.longWriteTx(ctx, op, 0, fn)
}

// longWriteTx is writeTx for a transaction that writes much, such as a
// batch: its deadline is the DB's timeout and extra more.
func (db *DB) longWriteTx(ctx context.Context, op string, extra time.Duration, fn func(*tx) error) error {
	if err := db.check(); err != nil {
		return err
	}
	if db.timeout <= 0 {
		return db.inTx(ctx, db.d.Write, nil, op, fn)
	}
	ctx, cancel := context.WithTimeout(ctx, db.timeout+extra)
	defer cancel()
	return db.inTx(ctx, db.d.Write, nil, op, fn)
}

// readTx runs fn in a read transaction of the read pool, within the DB's
// timeout: one snapshot of the last commit.
func (db *DB) readTx(ctx context.Context, op string, fn func(*tx) error) error {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	return db.inTx(ctx, db.d.Read, db.d.ReadTx, op, fn)
}

// read runs fn, whose statements read from the read pool outside of a
// transaction, within the DB's timeout: for single statements.
func (db *DB) read(ctx context.Context, op string, fn func(*tx) error) error {
	start := time.Now()
	ctx, cancel := db.bound(ctx)
	defer cancel()
	if err := fn(&tx{q: db.d.Read, ctx: ctx, db: db}); err != nil {
		return db.txErr(ctx, start, err, op)
	}
	return nil
}

// bound returns ctx with the DB's timeout.
func (db *DB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if db.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, db.timeout)
}

// inTx runs fn in a transaction of pool and commits it unless fn fails.
// Every statement fn runs ends when ctx does, as do the transaction's begin
// and commit.
func (db *DB) inTx(ctx context.Context, pool *sql.DB, opts *sql.TxOptions, op string, fn func(*tx) error) error {
	start := time.Now()
	t, err := pool.BeginTx(ctx, opts)
	if err != nil {
		return db.txErr(ctx, start, err, op)
	}
	defer t.Rollback()
	if err := fn(&tx{q: t, ctx: ctx, db: db}); err != nil {
		return db.txErr(ctx, start, err, op)
	}
	if err := t.Commit(); err != nil {
		return db.txErr(ctx, start, err, op)
	}
	return nil
}

// txErr wraps err, the error of a transaction begun at start, as WrapErr
// does; when ctx's deadline passed (the driver may then tell of a closed
// connection, or of nothing), as feature.EUnavailable saying that the
// database did not answer in time.
func (db *DB) txErr(ctx context.Context, start time.Time, err error, op string) error {
	err = db.cause(ctx, err)
	if _, ok := errors.AsType[*feature.Error](err); ok || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return db.d.WrapErr(err, "%s", op)
	}
	within := "in time"
	if deadline, ok := ctx.Deadline(); ok {
		within = "within " + deadline.Sub(start).Round(100*time.Millisecond).String()
	}
	return fmt.Errorf("%s: %w: %w", op, feature.Errorf(feature.EUnavailable, "the database did not answer %s: try again shortly", within), err)
}

// cause adds ctx's error to err when ctx ended and err does not say so:
// database/sql answers sql.ErrTxDone for a transaction it rolled back
// because its context ended.
func (db *DB) cause(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) && errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w: %w", err, ctx.Err())
	}
	return err
}

// q returns query in the DB's dialect: its placeholders, collation, and
// column names. (None of the store's queries has a ? in a literal.)
func (db *DB) q(query string) string {
	s := db.marks.Replace(query)
	if !db.d.Dollar {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	n := 0
	for _, r := range s {
		if r != '?' {
			b.WriteRune(r)
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// tx is a transaction (or a pool, see DB.read) whose statements end with
// its context, written with ? placeholders and the marks of DB.q.
type tx struct {
	q   Querier
	ctx context.Context
	db  *DB // the DB, bound to the environment the transaction writes (see in)
	// auditLocked: the transaction holds the lock that orders audit
	// events (see appendAudit).
	auditLocked bool
}

func (t *tx) exec(query string, args ...any) (sql.Result, error) {
	return t.q.ExecContext(t.ctx, t.db.q(query), args...)
}

// affected runs query and returns how many rows it changed.
func (t *tx) affected(query string, args ...any) (int64, error) {
	res, err := t.exec(query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	return t.q.QueryContext(t.ctx, t.db.q(query), args...)
}

func (t *tx) queryRow(query string, args ...any) *sql.Row {
	return t.q.QueryRowContext(t.ctx, t.db.q(query), args...)
}

// in returns the transaction as writes to the environment env see it: the
// same transaction, bound to env (a change made in every environment at
// once, such as a feature's creation).
func (t *tx) in(env string) *tx {
	c := *t
	c.db = t.db.In(env)
	return &c
}

// env is the environment the transaction reads and writes.
func (t *tx) env() string { return t.db.env }

func (t *tx) constraint(err error) Constraint {
	if err == nil {
		return NoConstraint
	}
	return t.db.d.Constraint(err)
}

// collect reads every row of rows with scan.
func collect[T any](rows *sql.Rows, err error, scan func(*sql.Rows) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// first reads the first row of rows with scan, or returns notFound when
// there is none.
func first[T any](rows *sql.Rows, err error, scan func(*sql.Rows) (T, error), notFound error) (T, error) {
	vs, err := collect(rows, err, scan)
	if err == nil && len(vs) == 0 {
		err = notFound
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return vs[0], nil
}

// timestamp scans a time kept as RFC 3339 text, a timestamp or Unix
// nanoseconds, in UTC; Valid is false for NULL.
type timestamp struct {
	T     time.Time
	Valid bool
}

func (s *timestamp) Scan(v any) error {
	var err error
	switch v := v.(type) {
	case nil:
		*s = timestamp{}
		return nil
	case time.Time:
		s.T = v.UTC()
	case string:
		s.T, err = time.Parse(time.RFC3339Nano, v)
	case []byte:
		s.T, err = time.Parse(time.RFC3339Nano, string(v))
	case int64:
		s.T = time.Unix(0, v).UTC()
	default:
		return fmt.Errorf("a time cannot be %T", v)
	}
	s.Valid = err == nil
	return err
}

// TimeLayout is RFC 3339 with a fixed nine-digit fraction, so that times
// kept as text sort as text; time.RFC3339Nano parses it.
const TimeLayout = "2006-01-02T15:04:05.000000000Z07:00"
