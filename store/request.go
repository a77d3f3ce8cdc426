package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
)

// settingsName is the settings table's row that keeps the settings.Settings
// of the environment env: "organisation" for production (as before
// environments), "organisation/ENV" for the others.
func settingsName(env string) string {
	if env == rollout.Production {
		return "organisation"
	}
	return "organisation/" + env
}

// Settings returns the saved settings, settings.Default when none
// were saved.
func (db *DB) Settings(ctx context.Context) (settings.Settings, error) {
	var s settings.Settings
	err := db.readTx(ctx, "read settings", func(tx *tx) (err error) {
		s, err = tx.readSettings()
		return err
	})
	return s, err
}

func (tx *tx) readSettings() (settings.Settings, error) {
	var value []byte
	err := tx.queryRow(`SELECT value FROM settings WHERE name = ?`, settingsName(tx.env())).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return settings.Default(), nil
	}
	if err != nil {
		return settings.Settings{}, err
	}
	s := settings.Default()
	if err := json.Unmarshal(value, &s); err != nil {
		return settings.Settings{}, fmt.Errorf("decode settings: %w", err)
	}
	if s.RequireApproval.Features == nil {
		s.RequireApproval.Features = []string{}
	}
	return s, nil
}

// SaveSettings stores s, which must be at the stored version plus one
// (feature.EPrecondition otherwise), and records e.
func (db *DB) SaveSettings(ctx context.Context, s settings.Settings, e audit.Event) error {
	value, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode settings: %w", err)
	}
	return db.writeTx(ctx, "save settings", func(tx *tx) error {
		// The event first: on PostgreSQL it takes the revision row's
		// lock, which serializes this read and write with every writer.
		if err := tx.appendAudit(e); err != nil {
			return err
		}
		cur, err := tx.readSettings()
		if err != nil {
			return err
		}
		if cur.Version != s.Version-1 {
			return feature.Errorf(feature.EPrecondition, "the settings are at version %d now, not %d: reload them and decide again", cur.Version, s.Version-1)
		}
		if cur.Version == 0 {
			_, err = tx.exec(`INSERT INTO settings (name, value) VALUES (?, ?)`, settingsName(tx.env()), value)
		} else {
			_, err = tx.exec(`UPDATE settings SET value = ? WHERE name = ?`, value, settingsName(tx.env()))
		}
		return err
	})
}

// CreateRequest stores r, records its request_create event and settles
// r.Settles. It returns
// feature.EConflict when r's author has request.MaxOpen open
// requests already.
func (db *DB) CreateRequest(ctx context.Context, r request.Request) error {
	body, err := encodeJSON(r)
	if err != nil {
		return fmt.Errorf("create request: %w", err)
	}
	return db.writeTx(ctx, fmt.Sprintf("create request of feature %q", r.Feature), func(tx *tx) error {
		if err := tx.appendAudit(r.AuditEvent(audit.RequestCreate, r.Author, r.Comment, r.CreatedAt)); err != nil {
			return err
		}
		var open int
		if err := tx.queryRow(`SELECT COUNT(*) FROM change_requests WHERE author = ? AND state = 'open'`, r.Author).Scan(&open); err != nil {
			return err
		}
		if open >= request.MaxOpen {
			return feature.Errorf(feature.EConflict, "%s has %d open change requests, the most one may have: cancel some, or wait for them to be decided", r.Author, open)
		}
		_, err := tx.exec(`
			INSERT INTO change_requests (id, environment, feature_key, state, author, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.ID, tx.env(), r.Feature, string(r.State), r.Author, body, db.d.Time(r.CreatedAt))
		if tx.constraint(err) == PrimaryKey {
			return feature.Errorf(feature.EConflict, "a request with ID %q already exists", r.ID)
		}
		if err != nil {
			return err
		}
		return tx.settle(r.Settles)
	})
}

// Requests returns the requests q selects, newest first.
func (db *DB) Requests(ctx context.Context, q request.Query) ([]request.Request, error) {
	var b strings.Builder
	b.WriteString(`SELECT body FROM change_requests WHERE environment = ?`)
	args := []any{db.env}
	if q.State != "" {
		b.WriteString(" AND state = ?")
		args = append(args, string(q.State))
	}
	if q.Feature != "" {
		b.WriteString(" AND feature_key = ?")
		args = append(args, q.Feature)
	}
	b.WriteString(" ORDER BY created_at DESC, id DESC")
	if q.Limit > 0 {
		fmt.Fprintf(&b, " LIMIT %d", q.Limit)
	}
	var rs []request.Request
	err := db.readTx(ctx, "list requests", func(tx *tx) error {
		rows, err := tx.query(b.String(), args...)
		rs, err = collect(rows, err, scanRequest)
		return err
	})
	return rs, err
}

// Request returns the request id; feature.ENotFound when there is none.
func (db *DB) Request(ctx context.Context, id string) (request.Request, error) {
	var r request.Request
	err := db.readTx(ctx, fmt.Sprintf("read request %q", id), func(tx *tx) (err error) {
		r, err = tx.findRequest(id)
		return err
	})
	return r, err
}

func (tx *tx) findRequest(id string) (request.Request, error) {
	rows, err := tx.query(`SELECT body FROM change_requests WHERE environment = ? AND id = ?`, tx.env(), id)
	return first(rows, err, scanRequest, feature.Errorf(feature.ENotFound, "there is no change request %q", id))
}

func scanRequest(rows *sql.Rows) (request.Request, error) {
	var body []byte
	var r request.Request
	if err := rows.Scan(&body); err != nil {
		return r, err
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("decode request: %w", err)
	}
	return r, nil
}

// CloseRequest marks the open request id rejected or canceled and records
// its event; feature.EConflict when it is not open.
func (db *DB) CloseRequest(ctx context.Context, id string, state request.State, by, comment string, at time.Time) error {
	kind := map[request.State]audit.Kind{request.Rejected: audit.RequestReject, request.Canceled: audit.RequestCancel}[state]
	if kind == "" {
		return fmt.Errorf("close request %q: state %q is not rejected or canceled", id, state)
	}
	return db.writeTx(ctx, fmt.Sprintf("close request %q", id), func(tx *tx) error {
		return tx.decideRequest(id, func(r *request.Request) audit.Event {
			r.State, r.DecidedBy, r.DecidedAt, r.Decision = state, by, &at, comment
			return r.AuditEvent(kind, by, comment, at)
		})
	})
}

// RepreviewRequest replaces the preview of the open request r.ID.
func (db *DB) RepreviewRequest(ctx context.Context, r request.Request) error {
	return db.writeTx(ctx, fmt.Sprintf("preview request %q again", r.ID), func(tx *tx) error {
		return tx.updateOpenRequest(r.ID, func(cur *request.Request) {
			cur.IfMatch, cur.BaseVersion, cur.Report, cur.Summary, cur.Repreviewed = r.IfMatch, r.BaseVersion, r.Report, r.Summary, r.Repreviewed
			cur.Segments, cur.RampSteps = r.Segments, r.RampSteps
		})
	})
}

// decideRequest closes the open request id as edit says, and records the
// event edit returns.
func (tx *tx) decideRequest(id string, edit func(*request.Request) audit.Event) error {
	var e audit.Event
	if err := tx.updateOpenRequest(id, func(r *request.Request) { e = edit(r) }); err != nil {
		return err
	}
	return tx.appendAudit(e)
}

// updateOpenRequest rewrites the open request id as edit changes it:
// feature.EConflict when it is not open (another process decided it),
// ENotFound when there is none.
func (tx *tx) updateOpenRequest(id string, edit func(*request.Request)) error {
	r, err := tx.findRequest(id)
	if err != nil {
		return err
	}
	edit(&r)
	body, err := encodeJSON(r)
	if err != nil {
		return err
	}
	n, err := tx.affected(`UPDATE change_requests SET state = ?, body = ? WHERE environment = ? AND id = ? AND state = 'open'`, string(r.State), body, tx.env(), id)
	if err != nil {
		return err
	}
	if n == 0 {
		return feature.Errorf(feature.EConflict, "change request %s was decided meanwhile: nothing was done", id)
	}
	return nil
}

// applyRequest marks the request of v.Request applied as version v of the
// feature key, and records request_approve.
func (tx *tx) applyRequest(key string, v rollout.Version) error {
	return tx.approveRequest(v.Request, v.Time, func(r *request.Request) { r.AppliedVersion = v.Version })
}

// approveRequest marks the request of d applied at at, as applied says
// (the version or ramp it made), and records request_approve.
func (tx *tx) approveRequest(d *request.Decision, at time.Time, applied func(*request.Request)) error {
	return tx.decideRequest(d.ID, func(r *request.Request) audit.Event {
		r.State, r.DecidedBy, r.DecidedAt, r.Decision = request.Applied, d.By, &at, d.Comment
		applied(r)
		e := r.AuditEvent(audit.RequestApprove, d.By, d.Comment, at)
		e.Version = r.AppliedVersion
		return e
	})
}
