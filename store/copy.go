package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// Copy and Compare move a whole database into another, table by table and
// column by column, whatever the dialects: the columns are read from each
// database's schema (Catalog), so a column a migration adds is copied
// without a word here, and a table is copied only if copyPlan names it. A
// table of the schema that copyPlan neither copies nor SkippedTables skips
// makes Copy fail: a table cannot be forgotten.

// Table is a table of a database's schema.
type Table struct {
	Name    string
	Columns []Column
}

// Column is a column of a table as the database declares it.
type Column struct {
	Name string
	// Type is the declared type in lower case: "text", "integer",
	// "timestamp with time zone", …
	Type string
	// Key is the column's position in the primary key, from 1; 0: not in
	// it.
	Key int
	// Serial: the database gives out the column's values (an AUTOINCREMENT
	// key, an identity, a sequence's default).
	Serial bool
}

// AddColumn adds c, a column of table, to tables, read in order of table:
// to the last table when it is table, else to a new one.
func AddColumn(tables []Table, table string, c Column) []Table {
	if len(tables) == 0 || tables[len(tables)-1].Name != table {
		tables = append(tables, Table{Name: table})
	}
	t := &tables[len(tables)-1]
	t.Columns = append(t.Columns, c)
	return tables
}

// Querier runs statements: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// Catalog is what Copy needs of a database's own catalog. Its functions
// run their statements on q with the database's own placeholders.
type Catalog struct {
	// Tables lists every table of the schema with its columns, in no
	// particular order.
	Tables func(ctx context.Context, q Querier) ([]Table, error)
	// LastSerial returns the last value the database gave out for the
	// serial column of table (0: none yet, or not a serial column).
	LastSerial func(ctx context.Context, q Querier, table, column string) (int64, error)
	// SetSerial makes the values the database gives out for the serial
	// column of table go on after last.
	SetSerial func(ctx context.Context, q Querier, table, column string, last int64) error
	// Overriding, when not "", follows the column list of an INSERT that
	// sets serial columns.
	Overriding string
}

// planTable is a table Copy copies.
type planTable struct {
	name string
	// seq: the table's rows are numbered in insertion order by the
	// dialect's Seq (a version's Seq), which is copied too.
	seq bool
	// replace: the migrations write the table's rows (the revision
	// counter); Copy replaces them rather than requiring none.
	replace bool
	// units are the units of times the SQLite schema keeps as whole
	// numbers (PostgreSQL as timestamps), by column.
	units map[string]time.Duration
}

// copyPlan is every table Copy copies, in the order it writes them: each
// after the tables its foreign keys name, and segments before the features
// whose rules use them.
var copyPlan = []planTable{
	{name: "environments", replace: true}, // the target's migrations made production
	{name: "segments"},
	{name: "segment_versions"},
	{name: "segment_users"},
	{name: "features"},
	{name: "versions", seq: true},
	{name: "churn_reports"},
	{name: "override_spans"},
	{name: "exposures"},
	{name: "rule_exposures"},
	{name: "tokens"},
	{name: "revision", replace: true},
	{name: "commits"},
	{name: "settings"},
	{name: "ended_sessions"},
	{name: "people_sessions"},
	{name: "exposure_batches", units: map[string]time.Duration{"received_at": time.Second}},
	{name: "idempotency_keys", units: map[string]time.Duration{"lease_until": time.Nanosecond, "expires_at": time.Nanosecond}},
	{name: "ramps"},
	{name: "schedules"},
	{name: "change_requests"},
	{name: "audit_events"},
	{name: "webhooks"},
	{name: "webhook_deliveries"},
	{name: "metrics"},
	{name: "tracked_events"},
	{name: "track_batches"},
	{name: "experiments"},
	{name: "experiment_users"},
	{name: "exposure_users"},
	{name: "experiment_snapshots"},
}

// SkippedTables are the tables of the schema that Copy deliberately does
// not copy, each with the reason.
var SkippedTables = map[string]string{
	"write_probe":      "one row the readiness check overwrites; the target's migrations made its own",
	"goose_db_version": "the migration library's record of the migrations applied; the target's own migrations wrote it",
	"sqlite_sequence":  "SQLite's counters of AUTOINCREMENT keys; Copy sets the target's counters (and PostgreSQL's sequences) itself, at or past the source's",
}

// CopiedTables returns the tables Copy copies, in the order it writes
// them.
func CopiedTables() []string {
	out := make([]string, len(copyPlan))
	for i, t := range copyPlan {
		out[i] = t.name
	}
	return out
}

// TableCount is how many rows Copy wrote into a table.
type TableCount struct {
	Table string
	Rows  int64
}

// CheckSchema returns an error naming every table of db's schema that
// Copy neither copies nor skips, and every table it copies that the schema
// lacks.
func CheckSchema(ctx context.Context, db *DB) error {
	var tables map[string]Table
	err := db.read(ctx, "read schema", func(tx *tx) (err error) {
		tables, err = db.tables(tx)
		return err
	})
	if err != nil {
		return err
	}
	return checkPlan(tables)
}

func checkPlan(tables map[string]Table) error {
	var errs []error
	planned := map[string]bool{}
	for _, p := range copyPlan {
		planned[p.name] = true
		if _, ok := tables[p.name]; !ok {
			errs = append(errs, fmt.Errorf("table %s is to be copied but the schema has no such table", p.name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		if _, skip := SkippedTables[name]; !planned[name] && !skip {
			errs = append(errs, fmt.Errorf("table %s is neither copied nor skipped with a reason: add it to copyPlan or SkippedTables in store/copy.go", name))
		}
	}
	return errors.Join(errs...)
}

func (db *DB) tables(tx *tx) (map[string]Table, error) {
	ts, err := db.d.Catalog.Tables(tx.ctx, tx.q)
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	out := make(map[string]Table, len(ts))
	for _, t := range ts {
		out[t.Name] = t
	}
	return out, nil
}

// Copy copies every table of copyPlan from src into dst, whose copied
// tables must be empty (feature.EConflict otherwise, naming what they
// hold): rows, their IDs and times, the revision counter and the
// sequences of serial columns (left at or past the source's), so that dst
// goes on where src stands. It reads src in one read transaction (one
// snapshot) and writes dst in one transaction, so a failure writes
// nothing; and it fails, writing nothing, if src took a commit meanwhile.
// Both databases must be at the same schema: a column in one only fails
// the copy. It returns the rows written per table, in copyPlan's order.
func Copy(ctx context.Context, src, dst *DB) ([]TableCount, error) {
	var counts []TableCount
	err := src.readTx(ctx, "read the source", func(stx *tx) error {
		return dst.writeTx(ctx, "write the target", func(dtx *tx) error {
			plans, err := pairTables(src, dst, stx, dtx)
			if err != nil {
				return err
			}
			if err := checkEmpty(dtx, plans); err != nil {
				return err
			}
			for _, p := range plans {
				n, err := p.copy(stx, dtx)
				if err != nil {
					return fmt.Errorf("copy table %s: %w", p.name, err)
				}
				counts = append(counts, TableCount{Table: p.name, Rows: n})
			}
			var rev int64
			if err := stx.queryRow(`SELECT revision FROM revision WHERE id = 1`).Scan(&rev); err != nil {
				return err
			}
			// Outside the snapshot: the source as it is now.
			now, err := src.Revision(ctx)
			if err != nil {
				return err
			}
			if now != rev {
				return fmt.Errorf("the source took commits while it was copied (revision %d, now %d): stop every instance writing to it", rev, now)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// checkEmpty fails with feature.EConflict, naming what they hold, unless
// every table of plans that Copy does not replace is empty.
func checkEmpty(dtx *tx, plans []tablePair) error {
	var held []string
	for _, p := range plans {
		if p.replace {
			continue
		}
		var n int64
		if err := dtx.queryRow(`SELECT count(*) FROM ` + p.name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%s %d", p.name, n))
		}
	}
	if len(held) > 0 {
		return feature.Errorf(feature.EConflict, "it is not empty (rows: %s)", strings.Join(held, ", "))
	}
	return nil
}

// Compare compares every table Copy copies, row by row and column by
// column, as Copy would have written src's rows into dst's dialect (times
// cut to what dst keeps), and returns one line for each difference: at
// most maxDiffsPerTable rows per table, then a count of the rest.
func Compare(ctx context.Context, src, dst *DB) ([]string, error) {
	var out []string
	err := src.readTx(ctx, "read the source", func(stx *tx) error {
		return dst.readTx(ctx, "read the target", func(dtx *tx) error {
			plans, err := pairTables(src, dst, stx, dtx)
			if err != nil {
				return err
			}
			for _, p := range plans {
				diffs, err := p.compare(stx, dtx)
				if err != nil {
					return fmt.Errorf("compare table %s: %w", p.name, err)
				}
				out = append(out, diffs...)
			}
			return nil
		})
	})
	return out, err
}

// maxDiffsPerTable bounds the rows Compare reports per table.
const maxDiffsPerTable = 10

// kind is how a column's values are read and written.
type kind int

const (
	kText kind = iota + 1
	kInt
	kReal
	kBlob
	kBool
	kTime
)

// kindOf returns the kind of a declared type of either dialect.
func kindOf(declared string) (kind, bool) {
	switch declared {
	case "text", "json", "jsonb", "character varying":
		return kText, true
	case "integer", "bigint", "smallint":
		return kInt, true
	case "real", "double precision":
		return kReal, true
	case "blob", "bytea":
		return kBlob, true
	case "boolean":
		return kBool, true
	case "timestamp with time zone":
		return kTime, true
	}
	return 0, false
}

// side is how one database keeps a column: its kind and, for a time kept
// as a whole number, the unit.
type side struct {
	kind kind
	unit time.Duration
}

// colPair is a column of both databases.
type colPair struct {
	name             string
	srcExpr, dstExpr string // the column, or the dialect's Seq
	canon            kind
	src, dst         side
	key              int
	serial           bool // in dst
}

// tablePair is a table of copyPlan with its columns in both databases.
type tablePair struct {
	planTable
	cols []colPair
	keys []int // indexes in cols of the primary key, in order
	dst  *DB
	src  *DB
}

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// pairTables reads both schemas, checks them against copyPlan and pairs
// the columns of each copied table.
func pairTables(src, dst *DB, stx, dtx *tx) ([]tablePair, error) {
	st, err := src.tables(stx)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	dt, err := dst.tables(dtx)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if err := checkPlan(st); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if err := checkPlan(dt); err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	var out []tablePair
	var errs []error
	for _, p := range copyPlan {
		tp, err := pairTable(p, src, dst, st[p.name], dt[p.name])
		if err != nil {
			errs = append(errs, fmt.Errorf("table %s: %w", p.name, err))
			continue
		}
		out = append(out, tp)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the databases are at different schemas (run both at the same release): %w", errors.Join(errs...))
	}
	return out, nil
}

func pairTable(p planTable, src, dst *DB, st, dt Table) (tablePair, error) {
	tp := tablePair{planTable: p, src: src, dst: dst}
	byName := func(t Table, seqCol string) map[string]Column {
		m := map[string]Column{}
		for _, c := range t.Columns {
			if p.seq && c.Name == seqCol {
				continue // paired below, whatever its name
			}
			m[c.Name] = c
		}
		return m
	}
	sc, dc := byName(st, src.d.Seq), byName(dt, dst.d.Seq)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(sc)) {
		if _, ok := dc[name]; !ok {
			errs = append(errs, fmt.Errorf("column %s is in the source only", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(dc)) {
		s, ok := sc[name]
		if !ok {
			errs = append(errs, fmt.Errorf("column %s is in the target only", name))
			continue
		}
		d := dc[name]
		if !identifier.MatchString(name) {
			errs = append(errs, fmt.Errorf("column %q: a name Copy does not quote", name))
			continue
		}
		cp, err := pairColumn(p, s, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tp.cols = append(tp.cols, cp)
	}
	if p.seq {
		tp.cols = append(tp.cols, colPair{name: "seq", srcExpr: src.d.Seq, dstExpr: dst.d.Seq, canon: kInt,
			src: side{kind: kInt}, dst: side{kind: kInt}, serial: slices.ContainsFunc(dt.Columns, func(c Column) bool { return c.Name == dst.d.Seq && c.Serial })})
	}
	if err := errors.Join(errs...); err != nil {
		return tp, err
	}
	for i, c := range tp.cols {
		if c.key > 0 {
			tp.keys = append(tp.keys, i)
		}
	}
	slices.SortFunc(tp.keys, func(a, b int) int { return tp.cols[a].key - tp.cols[b].key })
	if len(tp.keys) == 0 {
		return tp, errors.New("it has no primary key")
	}
	for _, i := range tp.keys {
		if k := tp.cols[i].canon; k != kText && k != kInt {
			return tp, fmt.Errorf("primary key column %s is neither text nor integer", tp.cols[i].name)
		}
	}
	return tp, nil
}

// pairColumn pairs column s of the source with d of the target: the same
// kind, or a time (timestamp) kept as text (RFC 3339) or as a whole number
// in the unit of p.units, or a boolean kept as a number.
func pairColumn(p planTable, s, d Column) (colPair, error) {
	cp := colPair{name: s.Name, srcExpr: `"` + s.Name + `"`, dstExpr: `"` + d.Name + `"`, key: d.Key, serial: d.Serial}
	sk, ok1 := kindOf(s.Type)
	dk, ok2 := kindOf(d.Type)
	if !ok1 || !ok2 {
		return cp, fmt.Errorf("column %s: Copy knows no type %q or %q", s.Name, s.Type, d.Type)
	}
	if s.Key != d.Key {
		return cp, fmt.Errorf("column %s: primary keys differ", s.Name)
	}
	unit := p.units[s.Name]
	cp.src, cp.dst = side{kind: sk, unit: unit}, side{kind: dk, unit: unit}
	pair := func(a, b kind) bool { return sk == a && dk == b || sk == b && dk == a }
	switch {
	case sk == dk:
		cp.canon = sk
	case pair(kTime, kText) && unit == 0, pair(kTime, kInt) && unit > 0:
		cp.canon = kTime
	case pair(kBool, kInt):
		cp.canon = kBool
	default:
		return cp, fmt.Errorf("column %s: Copy cannot convert %s to %s (a time kept as a number needs its unit in copyPlan)", s.Name, s.Type, d.Type)
	}
	return cp, nil
}

// selectRows returns the query reading the table's columns from the
// source (src) or the target, in primary key order.
func (p *tablePair) selectRows(src bool) string {
	var cols, order []string
	for _, c := range p.cols {
		cols = append(cols, p.expr(c, src))
	}
	collate := p.dst.d.Collate
	if src {
		collate = p.src.d.Collate
	}
	for _, i := range p.keys {
		c := p.cols[i]
		e := p.expr(c, src)
		if c.canon == kText {
			e += collate
		}
		order = append(order, e)
	}
	return `SELECT ` + strings.Join(cols, ", ") + ` FROM ` + p.name + ` ORDER BY ` + strings.Join(order, ", ")
}

func (p *tablePair) expr(c colPair, src bool) string {
	if src {
		return c.srcExpr
	}
	return c.dstExpr
}

// scanRow reads the current row of rows into canonical values.
func (p *tablePair) scanRow(rows *sql.Rows, src bool, raw []any) ([]any, error) {
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make([]any, len(raw))
	for i, c := range p.cols {
		sd := c.dst
		if src {
			sd = c.src
		}
		v, err := decode(raw[i], sd, c.canon)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.name, err)
		}
		out[i] = v
	}
	return out, nil
}

// insertBatch bounds the values of one INSERT.
const insertBatch = 2000

// copy copies the table's rows and, in dst, moves the sequences of its
// serial columns to or past the source's. It returns the rows copied.
func (p *tablePair) copy(stx, dtx *tx) (int64, error) {
	if p.replace {
		if _, err := dtx.exec(`DELETE FROM ` + p.name); err != nil {
			return 0, err
		}
	}
	rows, err := stx.query(p.selectRows(true))
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	perBatch := max(1, insertBatch/len(p.cols))
	var names []string
	serial := false
	for _, c := range p.cols {
		names = append(names, c.dstExpr)
		serial = serial || c.serial
	}
	head := `INSERT INTO ` + p.name + ` (` + strings.Join(names, ", ") + `)`
	if serial {
		head += p.dst.d.Catalog.Overriding
	}
	tuple := `(` + strings.TrimSuffix(strings.Repeat("?, ", len(p.cols)), ", ") + `)`
	maxes := make([]int64, len(p.cols))
	var n int64
	var args []any
	flush := func(count int) error {
		if count == 0 {
			return nil
		}
		q := head + ` VALUES ` + strings.TrimSuffix(strings.Repeat(tuple+", ", count), ", ")
		_, err := dtx.exec(q, args...)
		args = args[:0]
		return err
	}
	raw := make([]any, len(p.cols))
	pending := 0
	for rows.Next() {
		vals, err := p.scanRow(rows, true, raw)
		if err != nil {
			return n, err
		}
		for i, c := range p.cols {
			if v, ok := vals[i].(int64); ok && c.serial {
				maxes[i] = max(maxes[i], v)
			}
			args = append(args, encode(vals[i], c.dst, c.canon))
		}
		n++
		if pending++; pending == perBatch {
			if err := flush(pending); err != nil {
				return n, err
			}
			pending = 0
		}
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	if err := flush(pending); err != nil {
		return n, err
	}
	for i, c := range p.cols {
		if !c.serial {
			continue
		}
		last, err := p.src.d.Catalog.LastSerial(stx.ctx, stx.q, p.name, unquote(c.srcExpr))
		if err != nil {
			return n, fmt.Errorf("read the source's sequence of %s: %w", c.name, err)
		}
		if last = max(last, maxes[i]); last > 0 {
			if err := p.dst.d.Catalog.SetSerial(dtx.ctx, dtx.q, p.name, unquote(c.dstExpr), last); err != nil {
				return n, fmt.Errorf("set the sequence of %s: %w", c.name, err)
			}
		}
	}
	return n, nil
}

func unquote(s string) string { return strings.Trim(s, `"`) }

// compare compares the table's rows in both databases by primary key.
func (p *tablePair) compare(stx, dtx *tx) ([]string, error) {
	srows, err := stx.query(p.selectRows(true))
	if err != nil {
		return nil, err
	}
	defer srows.Close()
	drows, err := dtx.query(p.selectRows(false))
	if err != nil {
		return nil, err
	}
	defer drows.Close()
	sraw, draw := make([]any, len(p.cols)), make([]any, len(p.cols))
	next := func(rows *sql.Rows, src bool, raw []any) ([]any, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		vals, err := p.scanRow(rows, src, raw)
		if err != nil || !src {
			return vals, err
		}
		for i, c := range p.cols { // as Copy writes it
			if vals[i], err = decode(encode(vals[i], c.dst, c.canon), c.dst, c.canon); err != nil {
				return nil, err
			}
		}
		return vals, nil
	}
	var out []string
	more := 0
	report := func(s string) {
		if len(out) < maxDiffsPerTable {
			out = append(out, s)
		} else {
			more++
		}
	}
	s, err := next(srows, true, sraw)
	if err != nil {
		return nil, err
	}
	d, err := next(drows, false, draw)
	if err != nil {
		return nil, err
	}
	for s != nil || d != nil {
		c := 0
		switch {
		case s == nil:
			c = 1
		case d == nil:
			c = -1
		default:
			c = p.compareKeys(s, d)
		}
		switch {
		case c < 0:
			report(fmt.Sprintf("table %s: row %s is missing from the target", p.name, p.describeKey(s)))
		case c > 0:
			report(fmt.Sprintf("table %s: row %s is in the target only", p.name, p.describeKey(d)))
		default:
			var cols []string
			for i, col := range p.cols {
				if !equalValues(s[i], d[i]) {
					cols = append(cols, fmt.Sprintf("%s: source %s, target %s", col.name, show(s[i]), show(d[i])))
				}
			}
			if len(cols) > 0 {
				report(fmt.Sprintf("table %s: row %s differs: %s", p.name, p.describeKey(s), strings.Join(cols, "; ")))
			}
		}
		if c <= 0 {
			if s, err = next(srows, true, sraw); err != nil {
				return nil, err
			}
		}
		if c >= 0 {
			if d, err = next(drows, false, draw); err != nil {
				return nil, err
			}
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("table %s: %d more rows differ", p.name, more))
	}
	return out, nil
}

// compareKeys orders two rows by primary key as both databases sort
// them: text by bytes, numbers by value.
func (p *tablePair) compareKeys(a, b []any) int {
	for _, i := range p.keys {
		var c int
		switch x := a[i].(type) {
		case string:
			y, _ := b[i].(string)
			c = strings.Compare(x, y)
		case int64:
			y, _ := b[i].(int64)
			c = cmpInt(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func (p *tablePair) describeKey(row []any) string {
	var parts []string
	for _, i := range p.keys {
		parts = append(parts, p.cols[i].name+"="+show(row[i]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// show formats a value for a difference, cut to a readable length.
func show(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		s = fmt.Sprintf("%q", v)
	case []byte:
		s = fmt.Sprintf("%d bytes %x", len(v), v)
	case time.Time:
		s = v.Format(time.RFC3339Nano)
	default:
		s = fmt.Sprint(v)
	}
	const maxShow = 120
	if len(s) > maxShow {
		s = s[:maxShow] + "…"
	}
	return s
}

func equalValues(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	return a == b
}

// decode returns the value v one database read for a column kept as sd,
// canonical: nil, string, int64, float64, []byte, bool or a time.Time in
// UTC.
func decode(v any, sd side, canon kind) (any, error) {
	if v == nil {
		return nil, nil
	}
	bad := func() (any, error) { return nil, fmt.Errorf("a %T where a %s belongs", v, kindName(canon)) }
	switch canon {
	case kText:
		switch v := v.(type) {
		case string:
			return v, nil
		case []byte:
			return string(v), nil
		}
	case kBlob:
		switch v := v.(type) {
		case []byte:
			return bytes.Clone(v), nil
		case string:
			return []byte(v), nil
		}
	case kInt:
		if v, ok := v.(int64); ok {
			return v, nil
		}
	case kReal:
		switch v := v.(type) {
		case float64:
			return v, nil
		case int64:
			return float64(v), nil
		}
	case kBool:
		switch v := v.(type) {
		case bool:
			return v, nil
		case int64:
			return v != 0, nil
		}
	case kTime:
		switch sd.kind {
		case kTime:
			if t, ok := v.(time.Time); ok {
				return t.UTC(), nil
			}
		case kText:
			var s string
			switch v := v.(type) {
			case string:
				s = v
			case []byte:
				s = string(v)
			default:
				return bad()
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, err
			}
			return t.UTC(), nil
		case kInt:
			if n, ok := v.(int64); ok {
				if sd.unit == time.Second {
					return time.Unix(n, 0).UTC(), nil
				}
				return time.Unix(0, n*int64(sd.unit)).UTC(), nil
			}
		}
	}
	return bad()
}

// encode returns the canonical value v as a database keeping the column as
// sd takes it.
func encode(v any, sd side, canon kind) any {
	if v == nil {
		return nil
	}
	switch canon {
	case kTime:
		t := v.(time.Time)
		switch sd.kind {
		case kText:
			return t.UTC().Format(TimeLayout)
		case kInt:
			if sd.unit == time.Second {
				return t.Unix()
			}
			return t.UnixNano() / int64(sd.unit)
		}
		return t.Truncate(time.Microsecond) // all a timestamp keeps
	case kBool:
		if sd.kind == kInt {
			if v.(bool) {
				return int64(1)
			}
			return int64(0)
		}
	}
	return v
}

func kindName(k kind) string {
	return [...]string{kText: "text", kInt: "whole number", kReal: "number", kBlob: "blob", kBool: "boolean", kTime: "time"}[k]
}
