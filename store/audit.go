package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/rollout/rollout/rollout/audit"
)

// AppendAudit records e in the audit trail inside tx, the transaction of
// the change it records, so that both commit or neither does. It is what
// every writing method of the store calls (insertVersion for each version,
// so that a store method that appends versions records them without more);
// a method that changes something without a version calls it itself. The
// event's ID is the table's; its time is e.Time, or the store's clock when
// zero. On PostgreSQL it first takes the revision row's lock, which every
// writing transaction takes before it commits (addCommit), so that events
// get their IDs in commit order: a reader that has seen event n committed
// never sees an event below n appear later.
func (tx *tx) appendAudit(e audit.Event) error {
	return tx.appendAudits([]audit.Event{e})
}

// auditColumns are the columns of an audit event that appendAudits writes.
const auditColumns = 11

// appendAudits records es in the audit trail, in their order, as
// appendAudit does each, with as few statements as the rows take.
func (tx *tx) appendAudits(es []audit.Event) error {
	if len(es) == 0 {
		return nil
	}
	if tx.db.d.ForUpdate != "" && !tx.auditLocked {
		if _, err := tx.exec(`SELECT revision FROM revision WHERE id = 1 {forUpdate}`); err != nil {
			return fmt.Errorf("record audit event: %w", err)
		}
		tx.auditLocked = true // until the transaction ends
	}
	for part := range slices.Chunk(es, chunk) {
		args := make([]any, 0, auditColumns*len(part))
		for _, e := range part {
			if e.Time.IsZero() {
				e.Time = tx.db.now()
			}
			if e.Actor == "" {
				e.Actor = "anonymous"
			}
			var churn any
			if e.Churn != nil {
				churn = *e.Churn
			}
			env := tx.env()
			if e.Kind.Shared() {
				env = ""
			}
			args = append(args, tx.db.d.Time(e.Time), e.Actor, string(e.Kind), e.Feature, e.FeatureID, e.Version, e.Subject, e.Summary, e.Comment, churn, env)
		}
		// One statement's rows get their IDs in their order.
		if _, err := tx.exec(`
		INSERT INTO audit_events (created_at, actor, kind, feature_key, feature_id, version, subject, summary, comment, churn, environment)
		VALUES `+rows(auditColumns, len(part)), args...); err != nil {
			return fmt.Errorf("record audit event: %w", err)
		}
	}
	return nil
}

// rows returns the VALUES of n rows of columns placeholders each.
func rows(columns, n int) string {
	row := "(?" + strings.Repeat(", ?", columns-1) + ")"
	return row + strings.Repeat(", "+row, n-1)
}

// AuditEvents returns the events of the audit trail that q selects, by
// ID: oldest first when q.Ascending, else newest first.
func (db *DB) AuditEvents(ctx context.Context, q audit.Query) ([]audit.Event, error) {
	var out []audit.Event
	err := db.read(ctx, "list audit events", func(tx *tx) (err error) {
		out, err = db.auditEvents(tx, q)
		return err
	})
	return out, err
}

// auditEvents is AuditEvents in tx.
func (db *DB) auditEvents(tx *tx, q audit.Query) ([]audit.Event, error) {
	var b strings.Builder
	b.WriteString(`
		SELECT id, created_at, actor, kind, feature_key, feature_id, version, subject, summary, comment, churn, environment
		FROM audit_events WHERE 1 = 1`)
	var args []any
	if q.Environment != "" {
		b.WriteString(" AND environment IN (?, '')")
		args = append(args, q.Environment)
	}
	if q.Feature != "" {
		b.WriteString(" AND feature_key = ?")
		args = append(args, q.Feature)
	}
	if q.Actor != "" {
		b.WriteString(" AND actor = ?")
		args = append(args, q.Actor)
	}
	if q.ActorContains != "" {
		b.WriteString(` AND LOWER(actor) LIKE ? ESCAPE '\'`)
		esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(strings.ToLower(q.ActorContains))
		args = append(args, "%"+esc+"%")
	}
	if q.Kind != "" {
		b.WriteString(" AND kind = ?")
		args = append(args, string(q.Kind))
	}
	if !q.Since.IsZero() {
		b.WriteString(" AND created_at >= ?")
		args = append(args, db.d.Time(q.Since))
	}
	if q.Before > 0 {
		b.WriteString(" AND id < ?")
		args = append(args, q.Before)
	}
	if q.After > 0 {
		b.WriteString(" AND id > ?")
		args = append(args, q.After)
	}
	if q.Ascending {
		b.WriteString(" ORDER BY id")
	} else {
		b.WriteString(" ORDER BY id DESC")
	}
	if q.Limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, q.Limit)
	}
	rows, err := tx.query(b.String(), args...)
	return collect(rows, err, func(rows *sql.Rows) (audit.Event, error) {
		var (
			e     audit.Event
			at    timestamp
			kind  string
			churn sql.NullFloat64
		)
		err := rows.Scan(&e.ID, &at, &e.Actor, &kind, &e.Feature, &e.FeatureID, &e.Version, &e.Subject, &e.Summary, &e.Comment, &churn, &e.Environment)
		e.Time, e.Kind = at.T, audit.Kind(kind)
		if churn.Valid {
			e.Churn = &churn.Float64
		}
		return e, err
	})
}
